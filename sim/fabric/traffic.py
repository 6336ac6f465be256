"""Traffic generators for the fabric model: seeded, vectorized, chunked.

Every generator turns an offered load (flits per cycle per input port, 0 < load <= 1) into
packet arrivals, one chunk of cycles at a time, for one batch point. A chunk is two
``(cycles, n_ports)`` ``int16`` arrays: ``dest`` (the destination port, -1 where no packet
is created) and ``size`` (flits). Arrivals are a Bernoulli process per source with
probability ``load / packet_size`` per cycle (except ``bursty``, an on/off process).

Each batch point owns its ``np.random.default_rng`` stream, keyed by ``(seed, seed index,
load)``, so a point's traffic does not depend on which other points share its batch and a
run reproduces bit for bit.

The MoE expert placement is a property of the rack, not of a load point: it comes from its
own stream, keyed by ``traffic.placement_seed`` (default: the run seed), so every load and
seed index of a sweep simulates the same rack (:func:`placement_rng`, :func:`placement`).
:func:`output_bound` gives the accepted throughput at which the hottest output saturates
for a placement, computed from the popularity law alone (no simulation).

Patterns (``TrafficParams.pattern``):

``uniform``
    destination uniform over all ports (``include_self``) or over the other ports.
``permutation``
    a fixed random permutation drawn from the point's seed.
``transpose``
    ports as an r x c matrix (r the largest divisor of n <= sqrt(n)), index r*i+j -> the
    transposed position; a permutation for every n.
``hotspot``
    ``hotspot_fraction`` of packets to ports ``0..hotspot_ports-1``, the rest uniform.
``bursty``
    on/off: geometric bursts of mean ``burst_length`` packets to one uniform destination,
    back to back, separated by geometric gaps sized so the mean load is ``load``.
``alltoall``
    each source walks the other ports in order (i+1, i+2, ...), Bernoulli arrivals.
``moe_dispatch``
    tokens routed to ``topk`` distinct experts of Zipf(``zipf``) popularity; ``experts``
    experts (default one per port) placed on ports by a shuffle seeded with the placement
    seed; one packet per (token, expert).
``moe_combine``
    the reverse: expert ports send results back to uniform token owners; each port's
    injection rate is proportional to its experts' popularity (mean ``load``, capped at 1
    per port; the cap is reported in ``offered``).
``ring``
    i -> i+1 mod n (one ring all-reduce step).
``trace``
    replay of a CSV or JSONL trace with ``cycle, source, destination, size``.
``cpu_memory``
    a mixed rack (``link.ports`` with ``cpu`` ports): every other port (accelerator, gpu)
    offers ``load`` of its own rate, of which ``mem_fraction`` (in flits) are memory
    requests to a uniform cpu port (a READ of ``read_request_flits`` with probability
    ``read_fraction``, else a WRITE of ``write_flits``) and the rest ring packets of
    ``packet_size`` to the next non-cpu port (a collective among the accelerators); each
    cpu port answers the requests it is sent on average, open loop: READ responses of
    ``read_response_flits`` and WRITE completions of ``write_response_flits`` in the
    requests' proportions, to requesters drawn in proportion to their request rates, capped
    at the cpu's own rate (reported in ``offered``).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

__all__ = ["TrafficError", "make_generator", "load_trace", "zipf_weights", "expert_ports",
           "transpose_map", "point_rng", "placement_rng", "placement", "resolve_placement_seed",
           "topk_inclusion", "dest_shares", "output_bound", "PLACEMENT_TAG"]

#: Second key word of the placement stream, so that it never coincides with a point stream.
PLACEMENT_TAG = 0x504C4143


class TrafficError(ValueError):
    """A bad traffic parameter or a malformed trace line (named in the message)."""


def point_rng(seed: int, seed_index: int, load: float) -> np.random.Generator:
    """The random stream of one batch point."""
    return np.random.default_rng([int(seed), int(seed_index), int(round(load * 1e6))])


def resolve_placement_seed(traffic, run_seed: int) -> int:
    """``traffic.placement_seed``, or the run seed when it is -1 (the default)."""
    ps = int(traffic.placement_seed)
    return int(run_seed) if ps < 0 else ps


def placement_rng(placement_seed: int) -> np.random.Generator:
    """The stream of one expert placement (independent of load and seed index)."""
    return np.random.default_rng([int(placement_seed), PLACEMENT_TAG])


def placement(n_ports: int, experts: int, placement_seed: int) -> np.ndarray:
    """Port of each expert rank for a placement seed (see :func:`expert_ports`)."""
    return expert_ports(n_ports, experts or n_ports, placement_rng(placement_seed))


def transpose_map(n: int) -> np.ndarray:
    r = max(d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0)
    c = n // r
    idx = np.arange(n)
    row, col = idx // c, idx % c
    return (col * r + row).astype(np.int64)


def zipf_weights(n: int, s: float) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** float(s)
    return w / w.sum()


def expert_ports(n_ports: int, experts: int, rng: np.random.Generator) -> np.ndarray:
    """Port of each expert rank (rank 0 most popular): a seeded shuffle, round-robin."""
    slots = np.arange(experts) % n_ports
    return rng.permutation(slots)


def _elementary(w: np.ndarray, k: int) -> np.ndarray:
    """Elementary symmetric polynomials ``E_0 .. E_k`` of the weights ``w``."""
    e = np.zeros(k + 1)
    e[0] = 1.0
    for x in w:
        e[1:] = e[1:] + x * e[:-1]
    return e


def topk_inclusion(w: np.ndarray, k: int) -> np.ndarray:
    """Probability that each expert is among a token's ``k`` distinct experts.

    The generator draws ``k`` experts independently from ``w`` and redraws the whole token
    while two coincide, so a set S of ``k`` distinct experts has probability
    ``prod(w[S]) / E_k(w)``; expert e is in it with probability
    ``w[e] E_{k-1}(w without e) / E_k(w)`` (elementary symmetric polynomials). The
    probabilities sum to ``k``.
    """
    w = np.asarray(w, dtype=np.float64)
    k = int(k)
    if not 1 <= k <= w.size:
        raise TrafficError(f"topk={k} must be in 1..experts={w.size}")
    ek = _elementary(w, k)[k]
    out = np.empty(w.size)
    for e in range(w.size):
        out[e] = w[e] * _elementary(np.delete(w, e), k - 1)[k - 1] / ek
    return out


def dest_shares(traffic, n_ports: int, placement_seed: int | None = None):
    """The stationary traffic law of a pattern: ``(src_rate, out_rate)`` or ``None``.

    ``src_rate(load)`` gives each source's injection in flits per cycle at offered load
    ``load`` (after any per-port cap); ``out_rate(rates)`` the flits per cycle each output
    receives for those source rates, in the long run. ``None`` for a trace (no law).
    Bursty bursts pick uniform destinations, so its long-run law is the uniform one. The
    MoE patterns need the ``placement_seed``.
    """
    t, n = traffic, int(n_ports)
    p = t.pattern
    flat = lambda load: np.full(n, min(float(load), 1.0))  # noqa: E731
    if p in ("uniform", "bursty"):
        if p == "uniform" and not t.include_self:
            return flat, lambda r: (r.sum() - r) / (n - 1)
        return flat, lambda r: np.full(n, r.sum() / n)
    if p in ("permutation", "transpose", "ring", "alltoall"):
        return flat, lambda r: np.full(n, r.mean())  # a permutation (or a rotation of one)
    if p == "hotspot":
        h, f = int(t.hotspot_ports), float(t.hotspot_fraction)
        law = np.full(n, (1.0 - f) / n)
        law[:h] += f / h
        return flat, lambda r: r.sum() * law
    if p in ("moe_dispatch", "moe_combine"):
        experts = t.experts or n
        w = zipf_weights(experts, t.zipf)
        if placement_seed is None:
            raise TrafficError(f"pattern {p!r} needs a placement seed for its law")
        port_of = placement(n, experts, placement_seed)
        if p == "moe_dispatch":
            per_packet = topk_inclusion(w, t.topk) / t.topk     # share of packets per expert
            law = np.bincount(port_of, weights=per_packet, minlength=n)
            return flat, lambda r: r.sum() * law
        port_w = np.bincount(port_of, weights=w, minlength=n)
        rate = lambda load: np.minimum(float(load) * n * port_w, 1.0)  # noqa: E731
        return rate, lambda r: (r.sum() - r) / (n - 1)
    return None


def output_bound(traffic, n_ports: int, placement_seed: int | None = None) -> float | None:
    """Accepted throughput (flits per cycle per port, mean over ports) at which the
    hottest output port saturates: the largest mean injection for which no output
    receives more than one flit per cycle (no source more than one either).

    The offered load is raised by bisection until the hottest output's share reaches one
    flit per cycle (or every source is capped at one); the mean source rate at that load is
    the bound. ``None`` for patterns with no stationary law (trace).
    """
    law = dest_shares(traffic, n_ports, placement_seed)
    if law is None:
        return None
    src_rate, share = law

    def hottest(load):
        return float(share(src_rate(load)).max())

    hi = 1.0
    while hottest(hi) < 1.0 and float(src_rate(hi).min()) < 1.0 and hi < 1e6:
        hi *= 2.0
    if hottest(hi) <= 1.0:
        return float(src_rate(hi).mean())
    lo = 0.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if hottest(mid) <= 1.0:
            lo = mid
        else:
            hi = mid
    return float(src_rate(lo).mean())


class _Gen:
    def __init__(self, n_ports, load, packet_size, rng):
        self.n = n_ports
        self.load = float(load)
        self.size = int(packet_size)
        self.rng = rng
        self.p = np.full(self.n, self.load / self.size)

    def arrivals(self, cycles):
        return self.rng.random((cycles, self.n)) < self.p[None, :]

    def dests(self, arrive):  # pragma: no cover - overridden
        raise NotImplementedError

    def chunk(self, t0, cycles):
        arrive = self.arrivals(cycles)
        dest = np.full((cycles, self.n), -1, dtype=np.int16)
        d = self.dests(arrive)
        dest[arrive] = d
        size = np.where(arrive, self.size, 0).astype(np.int16)
        return dest, size

    @property
    def offered(self) -> float:
        """Mean offered load in flits per cycle per port (after any cap)."""
        return float(np.mean(np.minimum(self.p * self.size, 1.0)))


class Uniform(_Gen):
    def __init__(self, n, load, size, rng, include_self=True):
        super().__init__(n, load, size, rng)
        self.include_self = include_self

    def dests(self, arrive):
        src = np.nonzero(arrive)[1]
        if self.include_self:
            return self.rng.integers(0, self.n, src.size)
        return (src + 1 + self.rng.integers(0, self.n - 1, src.size)) % self.n


class Fixed(_Gen):
    def __init__(self, n, load, size, rng, mapping):
        super().__init__(n, load, size, rng)
        self.mapping = np.asarray(mapping, dtype=np.int64)

    def dests(self, arrive):
        return self.mapping[np.nonzero(arrive)[1]]


class Hotspot(_Gen):
    def __init__(self, n, load, size, rng, hot, frac, include_self=True):
        super().__init__(n, load, size, rng)
        self.hot, self.frac, self.include_self = int(hot), float(frac), include_self

    def dests(self, arrive):
        src = np.nonzero(arrive)[1]
        k = src.size
        uni = self.rng.integers(0, self.n, k)
        hot = self.rng.integers(0, self.hot, k)
        return np.where(self.rng.random(k) < self.frac, hot, uni)


class AllToAll(_Gen):
    def __init__(self, n, load, size, rng):
        super().__init__(n, load, size, rng)
        self.count = np.zeros(n, dtype=np.int64)

    def dests(self, arrive):
        rows, src = np.nonzero(arrive)
        order = np.lexsort((rows, src))  # per source, in time order
        s = src[order]
        rank = np.arange(s.size) - np.searchsorted(s, s)  # index within its source
        k = self.count[s] + rank
        d = np.empty(s.size, dtype=np.int64)
        d[order] = (s + 1 + k % (self.n - 1)) % self.n
        np.add.at(self.count, src, 1)
        return d


class Bursty(_Gen):
    """On/off source: bursts of back-to-back packets to one destination.

    Time is cut into packet slots of ``packet_size`` cycles. An on period lasts a
    geometric number (>= 1, mean ``burst_length``) of slots, each carrying one packet to
    the burst's uniform destination; an off period lasts a geometric number (>= 0) of
    empty slots with mean ``burst_length * (1 - load) / load``, so the mean load is
    ``load``. Periods carry over chunk boundaries exactly.
    """

    def __init__(self, n, load, size, rng, burst_length):
        super().__init__(n, load, size, rng)
        self.mean_on = float(burst_length)
        self.mean_off = self.mean_on * (1.0 - self.load) / self.load
        self.remaining = np.zeros(n, dtype=np.int64)   # slots left in the current period
        self.on = np.zeros(n, dtype=bool)
        self.dest = np.zeros(n, dtype=np.int64)
        self.phase = np.zeros(n, dtype=np.int64)       # next slot start, from chunk start

    def chunk(self, t0, cycles):
        dest = np.full((cycles, self.n), -1, dtype=np.int16)
        size = np.zeros((cycles, self.n), dtype=np.int16)
        sz = self.size
        for i in range(self.n):
            pos = int(self.phase[i])
            while pos < cycles:
                if self.remaining[i] == 0:
                    self.on[i] = not self.on[i]
                    if self.on[i]:
                        self.remaining[i] = self.rng.geometric(1.0 / self.mean_on)
                        self.dest[i] = self.rng.integers(0, self.n)
                    elif self.mean_off > 0:
                        self.remaining[i] = self.rng.geometric(1.0 / (self.mean_off + 1)) - 1
                    continue
                slots = -(-(cycles - pos) // sz)
                take = int(min(self.remaining[i], slots))
                if self.on[i]:
                    starts = pos + sz * np.arange(take)
                    dest[starts, i] = self.dest[i]
                    size[starts, i] = sz
                pos += take * sz
                self.remaining[i] -= take
            self.phase[i] = pos - cycles
        return dest, size

    @property
    def offered(self):
        return self.load


class MoEDispatch(_Gen):
    """``port_of``: the expert placement (port of each expert rank); ``None`` draws it
    from ``rng`` (a generator used on its own)."""

    def __init__(self, n, load, size, rng, experts, topk, zipf, port_of=None):
        super().__init__(n, load, size, rng)
        self.experts = experts or n
        if topk > self.experts:
            raise TrafficError(f"topk={topk} exceeds experts={self.experts}")
        self.topk = topk
        self.w = zipf_weights(self.experts, zipf)
        self.port_of = (expert_ports(n, self.experts, rng) if port_of is None
                        else np.asarray(port_of, dtype=np.int64))
        self.port_w = np.bincount(self.port_of, weights=self.w, minlength=n)

    def _tokens(self, count):
        """``count`` tokens' top-k distinct experts, by rejection of repeated draws."""
        cdf = np.cumsum(self.w)
        cdf[-1] = 1.0
        e = np.searchsorted(cdf, self.rng.random((count, self.topk)), side="right")
        for _ in range(1000):
            s = np.sort(e, axis=1)
            bad = (s[:, 1:] == s[:, :-1]).any(axis=1) if self.topk > 1 else np.zeros(
                count, bool)
            if not bad.any():
                break
            e[bad] = np.searchsorted(cdf, self.rng.random((int(bad.sum()), self.topk)),
                                     side="right")
        return self.port_of[e]

    def dests(self, arrive):
        rows, src = np.nonzero(arrive)
        order = np.lexsort((rows, src))          # packets grouped by source, in time order
        counts = np.bincount(src, minlength=self.n)
        tokens = -(-counts // self.topk)
        e = self._tokens(int(tokens.sum())).reshape(-1)      # k ports per token, flattened
        seg = np.repeat(tokens * self.topk, 1)               # flattened length per source
        start = np.concatenate(([0], np.cumsum(seg)[:-1]))
        owner = np.repeat(np.arange(self.n), seg)
        pos = np.arange(e.size) - start[owner]
        keep = pos < counts[owner]                           # drop a last partial token
        d = np.empty(src.size, dtype=np.int64)
        d[order] = e[keep]
        return d


class MoECombine(_Gen):
    def __init__(self, n, load, size, rng, experts, zipf, port_of=None):
        super().__init__(n, load, size, rng)
        experts = experts or n
        w = zipf_weights(experts, zipf)
        if port_of is None:
            port_of = expert_ports(n, experts, rng)
        port_of = np.asarray(port_of, dtype=np.int64)
        self.port_of = port_of
        port_w = np.bincount(port_of, weights=w, minlength=n)
        self.p = np.minimum(self.load * n * port_w, 1.0) / self.size

    def dests(self, arrive):
        src = np.nonzero(arrive)[1]
        return (src + 1 + self.rng.integers(0, self.n - 1, src.size)) % self.n


class Trace(_Gen):
    """Replay: packets created by one source in the same cycle enter on later cycles."""

    def __init__(self, n, rng, records):
        super().__init__(n, 1.0, 1, rng)
        self.records = records
        cyc, src, dst, size = records
        # spill same-cycle packets of one source onto the next free cycles
        order = np.lexsort((np.arange(cyc.size), cyc, src))
        c2 = cyc[order].copy()
        s2 = src[order]
        for k in range(1, c2.size):
            if s2[k] == s2[k - 1] and c2[k] <= c2[k - 1]:
                c2[k] = c2[k - 1] + 1
        self.cyc, self.src, self.dst, self.sz = c2, s2, dst[order], size[order]
        self.spilled = int((c2 != cyc[order]).sum())
        self.end = int(c2.max()) + 1 if c2.size else 0
        self.p = np.zeros(n)

    def chunk(self, t0, cycles):
        dest = np.full((cycles, self.n), -1, dtype=np.int16)
        size = np.zeros((cycles, self.n), dtype=np.int16)
        m = (self.cyc >= t0) & (self.cyc < t0 + cycles)
        dest[self.cyc[m] - t0, self.src[m]] = self.dst[m]
        size[self.cyc[m] - t0, self.src[m]] = self.sz[m]
        return dest, size

    @property
    def offered(self):
        if self.end == 0:
            return 0.0
        return float(self.sz.sum()) / (self.end * self.n)


class CpuMemory(_Gen):
    """``cpu_memory`` (module docstring). ``kinds``: each port's kind; ``rates``: each
    port's line rate in flits per cycle (``None``: 1 for every port)."""

    def __init__(self, n, load, size, rng, kinds, rates, t):
        super().__init__(n, load, size, rng)
        if kinds is None or "cpu" not in kinds:
            raise TrafficError("pattern cpu_memory needs cpu ports (link.ports)")
        kinds = list(kinds)
        rate = np.ones(n) if rates is None else np.asarray(rates, float)
        self.cpu = np.array([i for i, k in enumerate(kinds) if k == "cpu"], np.int64)
        self.acc = np.array([i for i, k in enumerate(kinds) if k != "cpu"], np.int64)
        if self.acc.size < 2:
            raise TrafficError("pattern cpu_memory needs two ports that are not cpu")
        self.is_cpu = np.zeros(n, bool)
        self.is_cpu[self.cpu] = True
        self.ring_next = np.full(n, -1, np.int64)
        self.ring_next[self.acc] = np.roll(self.acc, -1)
        rf, mf = float(t.read_fraction), float(t.mem_fraction)
        self.rf = rf
        self.rq, self.wr = int(t.read_request_flits), int(t.write_flits)
        self.rsp, self.wack = int(t.read_response_flits), int(t.write_response_flits)
        mreq = rf * self.rq + (1 - rf) * self.wr           # mean request flits
        mrsp = rf * self.rsp + (1 - rf) * self.wack        # mean response flits
        flits = self.load * rate                           # accelerators' offered flits
        req = np.where(self.is_cpu, 0.0, flits * mf / mreq)          # requests per cycle
        ring = np.where(self.is_cpu, 0.0, flits * (1 - mf) / self.size)
        self.req_rate = req
        # a cpu is sent 1/C of every accelerator's requests and answers each once
        served = req.sum() / self.cpu.size
        self.response_flits = served * mrsp                # per cpu, before the cap
        cpu_flits = np.minimum(self.response_flits, rate)
        p = req + ring
        p[self.cpu] = cpu_flits[self.cpu] / mrsp
        if (p > 1).any():
            raise TrafficError(f"cpu_memory: a port would start {p.max():.3f} packets per "
                               "cycle (more than 1): raise the packet sizes or lower the load")
        self.p = p
        self.p_mem = np.divide(req, p, out=np.zeros(n), where=p > 0)  # a packet is a request
        self.requester_cdf = np.cumsum(req) / req.sum() if req.sum() > 0 else None
        self.mean_flits = np.where(self.is_cpu, mrsp, 0.0)
        self.mean_flits[self.acc] = np.divide(req[self.acc] * mreq + ring[self.acc]
                                              * self.size, p[self.acc],
                                              out=np.zeros(self.acc.size),
                                              where=p[self.acc] > 0)

    def chunk(self, t0, cycles):
        arrive = self.arrivals(cycles)
        rows, src = np.nonzero(arrive)
        k = src.size
        u_kind, u_read = self.rng.random(k), self.rng.random(k)
        u_dest = self.rng.random(k)
        read = u_read < self.rf
        cpu_src = self.is_cpu[src]
        mem = ~cpu_src & (u_kind < self.p_mem[src])
        d = np.where(mem, self.cpu[np.minimum((u_dest * self.cpu.size).astype(np.int64),
                                              self.cpu.size - 1)], self.ring_next[src])
        sz = np.where(mem, np.where(read, self.rq, self.wr), self.size)
        if cpu_src.any():
            who = np.searchsorted(self.requester_cdf, u_dest[cpu_src], side="right")
            d[cpu_src] = np.minimum(who, self.n - 1)
            sz[cpu_src] = np.where(read[cpu_src], self.rsp, self.wack)
        dest = np.full((cycles, self.n), -1, dtype=np.int16)
        size = np.zeros((cycles, self.n), dtype=np.int16)
        dest[rows, src] = d
        size[rows, src] = sz
        return dest, size

    @property
    def offered(self) -> float:
        return float(np.mean(self.p * self.mean_flits))


def load_trace(path: str | Path, n_ports: int):
    """Read a CSV (header ``cycle,source,destination,size``) or JSONL trace.

    Returns four ``int64`` arrays; every bad line raises :class:`TrafficError` naming the
    file, the line and the value.
    """
    path = Path(path)
    if not path.exists():
        raise TrafficError(f"trace file {str(path)!r} does not exist")
    rows = []
    keys = ("cycle", "source", "destination", "size")
    text = path.read_text()
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        for ln, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TrafficError(f"{path}:{ln}: not JSON ({exc.msg})") from None
            rows.append((ln, obj))
    else:
        reader = csv.DictReader(text.splitlines())
        if reader.fieldnames is None or set(keys) - set(f.strip() for f in reader.fieldnames):
            raise TrafficError(f"{path}: CSV header must name {', '.join(keys)} "
                               f"(got {reader.fieldnames})")
        for ln, obj in enumerate(reader, 2):
            rows.append((ln, {k.strip(): v for k, v in obj.items()}))
    out = np.zeros((4, len(rows)), dtype=np.int64)
    for k, (ln, obj) in enumerate(rows):
        for f, key in enumerate(keys):
            if key not in obj:
                raise TrafficError(f"{path}:{ln}: missing {key!r}")
            try:
                v = int(str(obj[key]).strip())
            except ValueError:
                raise TrafficError(f"{path}:{ln}: {key}={obj[key]!r} is not an integer") from None
            lo, hi = {"cycle": (0, 2**40), "source": (0, n_ports - 1),
                      "destination": (0, n_ports - 1), "size": (1, 4096)}[key]
            if not lo <= v <= hi:
                raise TrafficError(f"{path}:{ln}: {key}={v} is outside {lo}..{hi}")
            out[f, k] = v
    return out[0], out[1], out[2], out[3]


def make_generator(traffic, n_ports: int, load: float, rng: np.random.Generator,
                   trace=None, placement_seed: int | None = None, rates=None, kinds=None):
    """The generator of one batch point for a :class:`~sim.fabric.config.TrafficParams`.

    ``placement_seed``: the MoE expert placement's seed (:func:`placement`); a sweep
    passes the same one to every point. ``None`` draws the placement from ``rng``.
    ``rates``: each source port's line rate in flits per cycle (ports of different lanes,
    ``link.ports``); the offered load is then a fraction of each source's own rate. A
    trace is replayed as written. ``kinds``: each port's kind (``cpu_memory`` needs them;
    it applies ``rates`` itself, its cpu ports answering at the accelerators' rates).
    """
    if traffic.pattern == "cpu_memory":
        return CpuMemory(n_ports, load, traffic.packet_size, rng, kinds, rates, traffic)
    g = _make_generator(traffic, n_ports, load, rng, trace, placement_seed)
    if rates is not None and traffic.pattern != "trace":
        if traffic.pattern == "bursty":
            raise TrafficError("pattern bursty has no per-port rate (link.ports)")
        g.p = g.p * np.asarray(rates, float)
    return g


def _make_generator(traffic, n_ports, load, rng, trace, placement_seed):
    t = traffic
    n, size = n_ports, t.packet_size
    p = t.pattern
    if p == "uniform":
        return Uniform(n, load, size, rng, t.include_self)
    if p == "permutation":
        return Fixed(n, load, size, rng, rng.permutation(n))
    if p == "transpose":
        return Fixed(n, load, size, rng, transpose_map(n))
    if p == "ring":
        return Fixed(n, load, size, rng, (np.arange(n) + 1) % n)
    if p == "hotspot":
        if t.hotspot_ports > n:
            raise TrafficError(f"hotspot_ports={t.hotspot_ports} exceeds n_ports={n}")
        return Hotspot(n, load, size, rng, t.hotspot_ports, t.hotspot_fraction)
    if p == "bursty":
        return Bursty(n, load, size, rng, t.burst_length)
    if p == "alltoall":
        return AllToAll(n, load, size, rng)
    port_of = (None if placement_seed is None or p not in ("moe_dispatch", "moe_combine")
               else placement(n, t.experts or n, placement_seed))
    if p == "moe_dispatch":
        return MoEDispatch(n, load, size, rng, t.experts, t.topk, t.zipf, port_of)
    if p == "moe_combine":
        return MoECombine(n, load, size, rng, t.experts, t.zipf, port_of)
    if p == "trace":
        if trace is None:
            trace = load_trace(t.trace_file, n)
        return Trace(n, rng, trace)
    raise TrafficError(f"unknown pattern {p!r}")
