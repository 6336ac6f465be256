"""BookSim-style statistics of a fabric run: windows, throughput, latency, saturation.

A run has a warm-up period (no statistics), a sample period ``[w0, w1)`` and a drain
period: traffic keeps flowing after ``w1`` until every packet *created* in the sample
period has been delivered, or the drain limit is reached (BookSim's measurement
method). Per batch point:

``offered``
    flits created in the sample period per port per cycle (flits/cycle/port);
``accepted``
    flits delivered at the destinations in the sample period per port per cycle;
``latency_*``
    creation of a packet to delivery of its last flit (source queueing, link, switch),
    over packets created in the sample period: mean, p50, p99 (from an exact histogram up
    to 65,535 cycles) and max;
``unfinished``
    sampled packet deliveries still missing after the drain: non-zero means the latency
    figures are a lower bound;
``saturated``
    ``unfinished > 0``, or source-queue drops, or accepted below offered by more than
    ``tolerance`` (default 2 %): the point is past the saturation throughput.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np

from .engine import Fabric
from .kernel import S

__all__ = ["point_stats", "kind_stats", "sweep_summary", "to_json", "to_csv", "percentile_from_hist"]

CSV_FIELDS = ("load", "seed", "offered", "accepted", "latency_mean", "latency_p50",
              "latency_p99", "latency_max", "packets", "unfinished", "src_drops",
              "saturated")


def percentile_from_hist(hist: np.ndarray, q: float) -> float:
    total = hist.sum()
    if total == 0:
        return float("nan")
    cum = np.cumsum(hist)
    return float(np.searchsorted(cum, q / 100.0 * total, side="left"))


def point_stats(fab: Fabric, b: int, sample_cycles: int, tolerance: float = 0.02) -> dict:
    n = fab.n
    st = fab.s["st"][b]
    col = lambda k: st[:, S[k]]  # noqa: E731
    hist = fab.s["hist"][b]
    cnt = int(col("lat_cnt").sum())
    offered = float(col("gen_flits").sum()) / (n * sample_cycles)
    accepted = float(col("acc_flits").sum()) / (n * sample_cycles)
    unfinished = int(col("exp_deliv").sum()) - cnt
    drops = int(col("src_drop_pkts").sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        port_lat = np.where(col("lat_cnt") > 0, col("lat_sum") / np.maximum(col("lat_cnt"), 1),
                            np.nan)
    saturated = bool(unfinished > 0 or drops > 0 or accepted < offered * (1 - tolerance))
    return {
        "offered": offered,
        "accepted": accepted,
        "latency_mean": float(col("lat_sum").sum()) / cnt if cnt else float("nan"),
        "latency_p50": percentile_from_hist(hist, 50),
        "latency_p99": percentile_from_hist(hist, 99),
        "latency_max": int(fab.s["latmax"][b]) if cnt else None,
        "packets": cnt,
        "unfinished": unfinished,
        "src_drops": drops,
        "saturated": saturated,
        "per_port": {
            "offered": (col("gen_flits") / sample_cycles).round(6).tolist(),
            "accepted": (col("acc_flits") / sample_cycles).round(6).tolist(),
            "sent": (col("inj_flits") / sample_cycles).round(6).tolist(),
            "latency_mean": [None if np.isnan(x) else round(float(x), 3) for x in port_lat],
            "in_stalls": col("in_stalls").tolist(),
            "out_stalls": col("out_stalls").tolist(),
            "drops": (col("drop_dest") + col("drop_group") + col("drop_kind")).tolist(),
        },
    }


def kind_stats(ports, full_lanes: int, per_port: dict) -> dict:
    """Per port kind (``ports``: ``(kind, lanes)`` per port, ``link.ports``): ports, lanes,
    share of the rack's lanes (its share of the rack's bandwidth), and the flits per cycle
    its ports sent and received in the sample period, in total and as a fraction of the
    kind's line rate (``lanes / full_lanes`` flits per cycle per port and direction)."""
    out: dict = {}
    total_lanes = sum(l for _, l in ports)
    for p, (kind, lanes) in enumerate(ports):
        k = out.setdefault(kind, {"ports": 0, "lanes": 0, "sent": 0.0, "received": 0.0})
        k["ports"] += 1
        k["lanes"] += lanes
        k["sent"] += per_port["sent"][p]
        k["received"] += per_port["accepted"][p]
    for k in out.values():
        line = k["lanes"] / full_lanes
        k["lane_share"] = k["lanes"] / total_lanes
        k["sent_of_line"] = k["sent"] / line
        k["received_of_line"] = k["received"] / line
    return out


def sweep_summary(points: list[dict]) -> dict:
    """Saturation throughput and load of a sweep (one seed index at a time)."""
    by_seed: dict[int, list[dict]] = {}
    for p in points:
        by_seed.setdefault(p["seed"], []).append(p)
    out = {}
    for seed, pts in sorted(by_seed.items()):
        pts = sorted(pts, key=lambda p: p["load"])
        sat = [p for p in pts if p["saturated"]]
        out[str(seed)] = {
            "saturation_load": sat[0]["load"] if sat else None,
            "saturation_throughput": max(p["accepted"] for p in pts),
            "zero_load_latency": pts[0]["latency_mean"],
        }
    return out


def _clean(x):
    if isinstance(x, float) and (x != x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def to_json(result: dict) -> str:
    return json.dumps(_clean(result), indent=1) + "\n"


def to_csv(result: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_FIELDS)
    for p in result["points"]:
        w.writerow([("" if p.get(k) is None else
                     (f"{p[k]:.6g}" if isinstance(p[k], float) else p[k])) for k in CSV_FIELDS])
    return buf.getvalue()
