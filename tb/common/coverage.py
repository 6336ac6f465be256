"""Functional coverage with cocotb-coverage: declare cover points, export per run, merge.

A testbench declares its cover points once at import::

    from fusionfabric.tb.common.coverage import cover_point, cover_cross, export_coverage
    sample_width = cover_point("scrambler.width", bins=[1, 8, 32, 64, 66, 128])
    ...
    sample_width(64)            # sample
    export_coverage()           # at the end of each test: writes FF_COVERAGE_FILE

``python -m fusionfabric.tb.common.coverage build/`` merges every run's ``coverage.yml`` under a build
tree into ``build/coverage.yml`` and prints a short table (``make test`` does this).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["cover_point", "cover_cross", "export_coverage", "merge", "main"]


def cover_point(name: str, bins: Sequence[Any], xf: Callable | None = None,
                rel: Callable | None = None, bins_labels: Sequence[str] | None = None,
                at_least: int = 1) -> Callable[[Any], None]:
    """Declare a cover point and return a function that samples one value."""
    from cocotb_coverage.coverage import CoverPoint

    kw = dict(name=name, bins=list(bins), at_least=at_least)
    if xf is not None:
        kw["xf"] = xf
    if rel is not None:
        kw["rel"] = rel
    if bins_labels is not None:
        kw["bins_labels"] = list(bins_labels)

    @CoverPoint(**kw)
    def sample(value):
        return None

    return sample


def cover_cross(name: str, points: Sequence[str], samplers: Sequence[Callable] = ()):
    """Declare a cross of earlier cover points; sample it by calling the returned function
    with one value per point (it also samples those points)."""
    from cocotb_coverage.coverage import CoverCross

    @CoverCross(name=name, items=list(points))
    def sample(*values):
        return None

    def both(*values):
        for s, v in zip(samplers, values):
            s(v)
        sample(*values)

    return both if samplers else sample


def export_coverage(path: str | None = None) -> None:
    """Write the whole coverage database of this run as YAML."""
    from cocotb_coverage.coverage import coverage_db

    path = path or os.environ.get("FF_COVERAGE_FILE")
    if path and len(coverage_db):
        coverage_db.export_to_yaml(filename=path)


def merge(build_root: Path, out: Path) -> dict:
    """Merge every ``coverage.yml`` under ``build_root`` into ``out``; return the db."""
    import yaml

    files = sorted(p for p in Path(build_root).rglob("coverage.yml") if p != out)
    merged: dict = {}
    for f in files:
        db = yaml.safe_load(f.read_text()) or {}
        for name, item in db.items():
            if "bins:_hits" not in item:
                continue
            cur = merged.setdefault(name, {"bins": {}, "at_least": item.get("at_least", 1),
                                           "weight": item.get("weight", 1)})
            for b, h in item["bins:_hits"].items():
                cur["bins"][str(b)] = cur["bins"].get(str(b), 0) + int(h)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {}
    for name, item in sorted(merged.items()):
        bins = item["bins"]
        covered = sum(1 for h in bins.values() if h >= item["at_least"])
        report[name] = {"size": len(bins), "covered": covered,
                        "cover_percentage": round(100.0 * covered / max(1, len(bins)), 1),
                        "missed": [b for b, h in bins.items() if h < item["at_least"]][:20],
                        "bins:_hits": bins}
    out.write_text(yaml.safe_dump({"files": len(files), "points": report}, sort_keys=True))
    return report


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0]) if argv else Path("build")
    out = root / "coverage.yml"
    report = merge(root, out)
    if not report:
        print(f"coverage: no cover points found under {root}")
        return 0
    width = max(len(n) for n in report)
    print(f"{'cover point':<{width}}  bins  hit   %")
    for name, r in report.items():
        print(f"{name:<{width}}  {r['size']:>4}  {r['covered']:>3}  {r['cover_percentage']:5.1f}"
              + (f"  missed: {', '.join(r['missed'][:5])}" if r["missed"] else ""))
    total = sum(r["size"] for r in report.values())
    hit = sum(r["covered"] for r in report.values())
    print(f"{'total':<{width}}  {total:>4}  {hit:>3}  {100.0 * hit / max(1, total):5.1f}"
          f"   (merged into {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
