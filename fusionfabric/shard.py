"""``make test SHARD=i/N``: the pytest arguments of one shard of the CI suite.

``python -m fusionfabric.shard i/N`` prints the pytest-split arguments that select shard
``i`` of ``N`` (``--splits N --group i``, least-duration balancing on the durations stored
in ``tests/durations.json``), or exits 2 with one line naming a bad value. An empty
argument prints nothing (the whole suite). Every test runs in exactly one shard; a test
with no stored duration counts as the average one (pytest-split's rule).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

__all__ = ["DURATIONS", "shard_args", "main"]

#: Stored per-test durations (seconds, setup + call + teardown) that balance the shards;
#: rewritten by ``make durations``.
DURATIONS = Path(__file__).resolve().parents[1] / "tests" / "durations.json"


class ShardError(ValueError):
    """A bad ``SHARD`` value; the message names it."""


def shard_args(text: str, durations: Path = DURATIONS) -> list[str]:
    """pytest arguments for ``SHARD=text`` (``"i/N"``, 1 <= i <= N); ``[]`` for ``""``."""
    text = text.strip()
    if not text:
        return []
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    if not m:
        raise ShardError(f"SHARD={text!r} is not i/N (e.g. SHARD=1/4)")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= i <= n:
        raise ShardError(f"SHARD={text!r}: i must be in 1..N and N >= 1")
    if not durations.exists():
        raise ShardError(f"SHARD={text!r}: no stored durations ({durations}); run make "
                         "durations")
    return ["--splits", str(n), "--group", str(i), "--splitting-algorithm",
            "least_duration", "--durations-path", str(durations)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        print(" ".join(shard_args(argv[0] if argv else "")))
    except ShardError as exc:
        print(f"fusionfabric: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
