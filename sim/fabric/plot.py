"""matplotlib figures of sweeps and collectives (Agg backend, files only)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_sweep", "plot_collective"]


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_sweep(results: list[dict], path: str | Path, title: str = "") -> Path:
    """Latency (mean and p99) and accepted throughput versus offered load, one line per
    result (pattern or configuration)."""
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for r in results:
        label = r.get("label") or r["config"]["traffic"]["pattern"]
        pts = sorted((p for p in r["points"] if p["seed"] == 0), key=lambda p: p["load"])
        x = [p["offered"] for p in pts]
        lat = [p["latency_mean"] if not p["saturated"] else float("nan") for p in pts]
        p99 = [p["latency_p99"] if not p["saturated"] else float("nan") for p in pts]
        line, = ax1.plot(x, lat, "o-", label=f"{label} mean")
        ax1.plot(x, p99, "--", color=line.get_color(), label=f"{label} p99")
        ax2.plot([p["load"] for p in pts], [p["accepted"] for p in pts], "o-", label=label)
    ax1.set_xlabel("offered load (flits/cycle/port)")
    ax1.set_ylabel("packet latency (cycles)")
    ax1.set_yscale("log")
    ax1.set_title("latency vs offered load (unsaturated points)")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=7)
    ax2.plot([0, 1], [0, 1], ":", color="grey", label="accepted = offered")
    ax2.set_xlabel("offered load (flits/cycle/port)")
    ax2.set_ylabel("accepted throughput (flits/cycle/port)")
    ax2.set_title("throughput")
    ax2.grid(True, alpha=0.3)
    ax2.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_collective(rows: list[dict], path: str | Path, title: str = "") -> Path:
    """Bus bandwidth versus message size, one line per (op, algo)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    keys = sorted({(r["op"], r["algo"]) for r in rows})
    for op, algo in keys:
        rs = sorted((r for r in rows if (r["op"], r["algo"]) == (op, algo)),
                    key=lambda r: r["bytes"])
        ax.plot([r["bytes"] for r in rs], [r["busbw_GBps"] for r in rs], "o-",
                label=f"{op} {algo}")
    if rows:
        ax.axhline(rows[0]["link_GBps_per_direction"], color="grey", ls=":",
                   label="link payload rate per direction")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(title or "NCCL-style bus bandwidth vs message size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
