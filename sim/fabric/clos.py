"""Two-tier Clos (leaf-spine) scale-up domains in the cycle model.

Every switch of the Clos is the cycle kernel's switch (sim/fabric/kernel.py, ``_cycles``:
the same rules, called once per switch per cycle), with the ``[switch]`` parameters. Leaf
``l`` has endpoint ports ``0 .. E-1`` (endpoints ``l*E ..``, each on a ``[link]``) and
uplink ports ``E .. E+S-1``: uplink ``E+k`` is a link of ``topology.link_latency`` cycles
and ``topology.link_credits`` credits to input ``l`` of spine ``k``, whose output ``l``
comes back to leaf input ``E+k`` the same way. Routing (``topology.routing``) chooses the
uplink of a packet leaving its leaf; spines and destination leaves have one path.

:class:`ClosFabric` holds ``batch`` independent Clos domains (one per sweep point), the
state of every switch as a batch row of the kernel's :class:`~.kernel.State` (row
``point * switches + s``; leaves first, then spines). :func:`run_clos_sweep` is
:func:`~.run.run_sweep` for a Clos: same traffic streams, windows and statistics, over
the endpoints instead of one switch's ports.
"""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace

import numpy as np

from . import kernel as _k
from .config import (Config, ConfigError, LinkParams, SwitchParams, TopologyParams,
                     check_clos, max_iterations, parse_loads, ROUTINGS)
from .engine import Departures

__all__ = ["ClosFabric", "run_clos_sweep", "ecmp_uplink", "clos_group_tables"]

#: Cycles per kernel call (as sim/fabric/run.py).
CHUNK = 2048


def ecmp_uplink(src: int, dest: int, spines: int) -> int:
    """Spine index of flow (``src``, ``dest``) under ECMP (the kernel's hash)."""
    return int(_k.ecmp_hash(src, dest)) % spines


class ClosFabric:
    """``batch`` independent two-tier Clos domains of identical switches.

    Parameters as :class:`~.engine.Fabric`, plus ``topo`` (:class:`TopologyParams`).
    ``switch.n_ports`` is not used: a leaf has ``endpoints_per_leaf + spines`` ports, a
    spine one port per leaf; each switch runs ``min(iterations, ceil(log2 ports))`` iSLIP
    rounds (``iterations`` 0: 3).
    """

    HIST = 1 << 16

    def __init__(self, switch: SwitchParams, link: LinkParams | None, topo: TopologyParams,
                 batch: int = 1, *, window: tuple[int, int] = (0, 1 << 62),
                 src_queue: int = 4096, log: bool = False, log_capacity: int = 1 << 20,
                 parallel: bool = True, groups: dict | None = None):
        check_clos(topo, switch)
        link = link or LinkParams()
        if link.admission != "fifo":
            raise ConfigError(f"link.admission={link.admission!r}: per-destination admission "
                              "is modelled on one switch (topology.kind=crossbar) only")
        self.switch, self.link, self.topo = switch, link, topo
        self.parallel = parallel
        E, SP = topo.endpoints_per_leaf, topo.spines
        LV = topo.leaves
        self.leaves, self.spines, self.epl = LV, SP, E
        self.n = self.endpoints = LV * E
        self.nsw = S = LV + SP
        self.batch = B = int(batch)
        nports = np.array([E + SP] * LV + [LV] * SP, np.int64)
        N = int(nports.max())
        iters = switch.iterations or 3
        self.iters = np.array([min(iters, max_iterations(int(x))) for x in nports], np.int64)
        self.iterations = iters
        nep = np.array([E] * LV + [0] * SP, np.int64)
        e0 = np.array([l * E for l in range(LV)] + [0] * SP, np.int64)
        peer_s = np.full((S, N), -1, np.int64)
        peer_p = np.full((S, N), -1, np.int64)
        for l in range(LV):
            for k in range(SP):
                peer_s[l, E + k], peer_p[l, E + k] = LV + k, l      # leaf uplink -> spine
                peer_s[LV + k, l], peer_p[LV + k, l] = l, E + k     # spine down -> leaf
        self.nports, self.nep, self.e0 = nports, nep, e0
        self.net = _k.Net(nports, nep, e0, self.iters, peer_s, peer_p,
                          np.zeros((B * S, N), np.int64), np.zeros((B * S, N), np.int64),
                          np.ones(B, np.bool_))
        L = link.latency
        K = link.credits or 2 * L + 1
        L2 = topo.link_latency
        K2 = topo.link_credits or 2 * L2 + 1
        LM, KM = max(L, L2), max(K, K2)
        cap = switch.depth
        G = switch.n_groups
        members, gvalid = clos_group_tables(groups or {}, G, LV, E, SP, N)
        self.global_groups = {g: sorted(set(int(m) for m in mem))
                              for g, mem in (groups or {}).items()}
        self.groups = _k.Groups(members, gvalid,
                                np.ones((max(N, topo.endpoints), 1), np.bool_))
        self.p = np.zeros(len(_k.P), dtype=np.int64)
        pv = dict(N=N, FIFO=0, CAP=cap, ITERS=iters, OUT_DEPTH=switch.out_depth, L=L,
                  FRAME=link.frame_period, K=K, SQ=src_queue, H=self.HIST, W0=window[0],
                  W1=window[1], LOG=int(log), T0=0, C=0, USE_READY=0, G=G, DBITS16=1,
                  TOPO=1, ROUTING=ROUTINGS.index(topo.routing), EPL=E, SPINES=SP,
                  NE=self.endpoints, L2=L2, K2=K2, NSW=S)
        for k, v in pv.items():
            self.p[_k.P[k]] = v
        z = np.zeros
        i64 = np.int64
        BS = B * S
        od = switch.out_depth
        tcred = np.full((BS, N), K, i64)
        for b in range(BS):
            if b % S >= LV:
                tcred[b, :] = K2                      # spine inputs: from leaf uplinks
            else:
                tcred[b, E:] = K2                     # leaf inputs from spines
        seq_next = z((BS, N), i64)
        for pt in range(B):
            for l in range(LV):
                seq_next[pt * S + l, :E] = (l * E + np.arange(E)) << _k.SRC_SHIFT
        self.state = _k.State(
            q_gen=z((BS, N, N, cap), i64), q_info=z((BS, N, N, cap), i64),
            q_head=z((BS, N, N), i64), q_cnt=z((BS, N, N), i64),
            ne=z((BS, N, (N + 63) // 64), np.uint64),
            done=z((BS, N, N), np.bool_), hdone=z((BS, N, N), np.bool_),
            ob_gen=z((BS, N, od), i64), ob_info=z((BS, N, od), i64),
            ob_src=z((BS, N, od), i64), ob_head=z((BS, N), i64), ob_cnt=z((BS, N), i64),
            credit=np.full((BS, N), od, i64), lock=np.full((BS, N), -1, i64),
            gptr=z((BS, N), i64), aptr=z((BS, N), i64),
            sq_dest=z((BS, N, src_queue), i64), sq_size=z((BS, N, src_queue), i64),
            sq_kind=z((BS, N, src_queue), i64), sq_gen=z((BS, N, src_queue), i64),
            sq_seq=z((BS, N, src_queue), i64), sq_head=z((BS, N), i64),
            sq_cnt=z((BS, N), i64), sq_flit=z((BS, N), i64), seq_next=seq_next,
            # per-destination admission (link.admission=voq) is one switch only: size 1
            sv_size=z((BS, N, 1, 1), i64), sv_gen=z((BS, N, 1, 1), i64),
            sv_seq=z((BS, N, 1, 1), i64), sv_head=z((BS, N, 1), i64),
            sv_cnt=z((BS, N, 1), i64), sv_ne=z((BS, N, 1), np.uint64), sv_ptr=z((BS, N), i64),
            sv_cur=np.full((BS, N), -1, i64), sv_flit=z((BS, N), i64),
            sc=z((BS, N, 1), i64), sc_ret=np.full((BS, N, 1), -1, i64),
            lp_valid=z((BS, N, LM + 1), np.bool_), lp_gen=z((BS, N, LM + 1), i64),
            lp_info=z((BS, N, LM + 1), i64), tcred=tcred, cr_ret=z((BS, N, LM + 2), i64),
            rx_gen=z((BS, N, KM), i64), rx_info=z((BS, N, KM), i64), rx_head=z((BS, N), i64),
            rx_cnt=z((BS, N), i64),
            ecred=np.full((BS, N), K, i64), ecr_ret=z((BS, N, 2 * L + 2), i64),
            st=z((BS, N, _k.NSTAT), i64), hist=z((BS, self.HIST), i64), latmax=z(BS, i64),
        )
        self.s = self.state._asdict()
        self.log_capacity = log_capacity if log else 1
        self.departure_log = _k.Log(*(z(self.log_capacity, i64) for _ in range(5)), z(1, i64))
        self.log = self.departure_log._asdict()
        self.t = 0

    # -- running ---------------------------------------------------------------------------
    def step(self, gdest, gsize, ready=None, gkind=None) -> None:
        """Advance ``C`` cycles; arrays ``(batch, C, endpoints)``: packets created per
        (point, cycle, source endpoint) to destination endpoints (size 0: none);
        ``ready``: optional endpoint-side ready pattern (default always ready); ``gkind``:
        optional packet kinds, 0 unicast, 1 multicast (``gdest`` is then a global group
        of ``groups``; default all unicast), 2 and 3 (REDUCE, RESULT: the source leaf
        drops them and counts ``drop_kind``, as a switch without reduction units does).
        ``int16`` arrays (the traffic generators' type) go to the kernel as they are,
        others as ``int64``; without ``gkind`` the kinds are one zero broadcast over the
        chunk (a chunk of the default sweep has 10 x 2,048 x 1,024 entries per array, and
        copies to ``int64`` would cost about a second of serial time per chunk), with it a
        read-only strided view of the same numba type, so that both run one compiled
        kernel."""
        i16 = np.asarray(gdest).dtype == np.int16 and np.asarray(gsize).dtype == np.int16
        dt = np.int16 if i16 else np.int64
        gdest = np.ascontiguousarray(gdest, dtype=dt)
        gsize = np.ascontiguousarray(gsize, dtype=dt)
        B, C, n = gdest.shape
        if (B, n) != (self.batch, self.endpoints) or gsize.shape != gdest.shape:
            raise ValueError(f"traffic chunk shape {gdest.shape} does not match batch "
                             f"{self.batch} x cycles x {self.endpoints} endpoints")
        if gkind is None:
            gkind = np.broadcast_to(np.zeros(1, dt), gdest.shape)
        else:
            gkind = np.asarray(gkind)
            if gkind.shape != gdest.shape:
                raise ValueError(f"gkind shape {gkind.shape} != {gdest.shape}")
            live = gsize > 0
            bad = live & ((gkind < 0) | (gkind > 3))
            if bad.any():
                raise ConfigError(f"packet kind {int(gkind[bad][0])} is not 0 (unicast), 1 "
                                  "(multicast), 2 or 3 (reduction: dropped by the Clos's "
                                  "switches, which have no reduction units)")
            mc = live & (gkind == 1)
            off = mc & ((gdest < 0) | (gdest > 0xFFFF))
            if off.any():
                raise ConfigError(f"multicast to group {int(gdest[off][0])}: a Clos flit's "
                                  "group field is 0..65535")
            full = np.zeros(gdest.shape + (2,), dt)
            full[..., 0] = gkind
            gkind = full[..., 0]
            gkind.flags.writeable = False
        if ready is None:
            ready_arr, use_ready = np.ones((1, 1, 1), dtype=np.bool_), 0
        else:
            ready_arr, use_ready = np.ascontiguousarray(ready, dtype=np.bool_), 1
            if ready_arr.shape != gdest.shape:
                raise ValueError(f"ready shape {ready_arr.shape} != {gdest.shape}")
        self.p[_k.P["T0"]] = self.t
        self.p[_k.P["C"]] = C
        self.p[_k.P["USE_READY"]] = use_ready
        args = (self.p, self.groups, _k.Traffic(gdest, gsize, gkind, ready_arr), self.state,
                self.departure_log, self.net)
        if self.parallel and B >= 2 and not self.p[_k.P["LOG"]]:
            _k.run_clos_chunk_parallel(*args)
        else:
            _k.run_clos_chunk(*args)
        self.t += C
        if self.log["n"][0] > self.log_capacity and self.p[_k.P["LOG"]]:
            raise RuntimeError(f"departure log overflow: {int(self.log['n'][0])} > "
                               f"capacity {self.log_capacity}")

    def set_window(self, w0: int, w1: int) -> None:
        self.p[_k.P["W0"]] = w0
        self.p[_k.P["W1"]] = w1

    # -- results ---------------------------------------------------------------------------
    def departures(self) -> Departures:
        """Every output handshake of every switch; ``batch`` is the state row
        (``point * switches + switch``), ``out`` the switch's port."""
        n = min(int(self.log["n"][0]), self.log_capacity)
        lg = self.log
        order = np.lexsort((lg["o"][:n], lg["b"][:n], lg["t"][:n]))
        return Departures(lg["t"][:n][order], lg["o"][:n][order], lg["src"][:n][order],
                          lg["info"][:n][order], lg["b"][:n][order])

    def endpoint_view(self):
        """The statistics over endpoints, shaped as a single switch's
        (``n``, ``s["st"]`` ``(batch, endpoints, columns)``, ``hist``, ``latmax``), for
        :func:`~.stats.point_stats`."""
        B, S, LV, E = self.batch, self.nsw, self.leaves, self.epl
        st = self.s["st"].reshape(B, S, -1, _k.NSTAT)[:, :LV, :E]
        hist = self.s["hist"].reshape(B, S, -1)[:, :LV].sum(1)
        latmax = self.s["latmax"].reshape(B, S)[:, :LV].max(1)
        return SimpleNamespace(n=self.endpoints, s={
            "st": st.reshape(B, LV * E, _k.NSTAT), "hist": hist, "latmax": latmax})

    def stat(self, name: str) -> np.ndarray:
        """One per-endpoint statistics column, shape ``(batch, endpoints)``."""
        return self.endpoint_view().s["st"][:, :, _k.S[name]].copy()

    def in_flight(self) -> np.ndarray:
        """Flits inside the fabric (every switch and link) per batch point."""
        s, B = self.s, self.batch
        per = (s["q_cnt"].sum(axis=(1, 2)) + s["ob_cnt"].sum(axis=1)
               + s["rx_cnt"].sum(axis=1) + s["lp_valid"].sum(axis=(1, 2)))
        return per.reshape(B, self.nsw).sum(1)

    def backlog(self) -> np.ndarray:
        return self.s["sq_cnt"].reshape(self.batch, -1).sum(1)

    def credits_ok(self) -> bool:
        s = self.s
        return bool(np.all(s["credit"] + s["ob_cnt"] == self.switch.out_depth))

    def uplink_flits(self) -> np.ndarray:
        """Flits sent on each leaf uplink, ``(batch, leaves, spines)``."""
        B, S, LV, E = self.batch, self.nsw, self.leaves, self.epl
        out = self.s["st"][:, :, _k.S["flits_out"]].reshape(B, S, -1)
        return out[:, :LV, E:E + self.spines].copy()


def clos_group_tables(groups: dict, G: int, leaves: int, epl: int, spines: int, N: int):
    """Per-switch group tables of a Clos from its global groups (group id -> member
    endpoints): ``members[s * G + g, port]`` for switch ``s`` (leaves first, then spines)
    and ``gvalid[g]``. Leaf ``l``'s row of ``g`` holds its local members' ports and, when a
    member is on another leaf, every uplink (the ingress sends one copy up the uplink its
    routing picks, and none for a flit that came down); spine ``k``'s row holds port ``l``
    for every leaf ``l`` with a member (the ingress skips the flit's own leaf). Bad groups
    raise :class:`ConfigError` in one line."""
    n = leaves * epl
    S = leaves + spines
    members = np.zeros((S * G, N), np.bool_)
    gvalid = np.zeros(G, np.bool_)
    for g, mem in groups.items():
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or not 0 <= g < G:
            raise ConfigError(f"multicast group {g!r} is outside 0..{G - 1} "
                              f"(switch.n_groups={G})")
        if isinstance(mem, dict):
            raise ConfigError(f"group {g}: reduction groups (members, mode, root) are "
                              f"modelled on one switch, not on a Clos")
        mem = [m for m in mem]
        if len(mem) > n:
            raise ConfigError(f"group {g} has {len(mem)} members, more than the Clos's "
                              f"{n} endpoints")
        seen = set()
        for m in mem:
            if (isinstance(m, bool) or not isinstance(m, (int, np.integer))
                    or not 0 <= m < n):
                raise ConfigError(f"group {g} member {m!r} is not an endpoint 0..{n - 1}")
            if int(m) in seen:
                raise ConfigError(f"group {g} lists endpoint {int(m)} twice")
            seen.add(int(m))
        gvalid[g] = True
        on = sorted({m // epl for m in seen})
        for m in seen:
            members[(m // epl) * G + g, m % epl] = True
        for l in range(leaves):
            if any(x != l for x in on):
                members[l * G + g, epl:epl + spines] = True
        for k in range(spines):
            for l in on:
                members[(leaves + k) * G + g, l] = True
    return members, gvalid


def _progress(total, enabled):
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="cyc", file=sys.stderr, leave=False)


def run_clos_sweep(cfg: Config, *, progress: bool | None = None, log: bool = False,
                   points: list[tuple[float, int]] | None = None) -> dict:
    """:func:`~.run.run_sweep` for ``topology.kind = "clos"`` (which calls it): every (load,
    seed index) point is one Clos domain of the batch, with the same per-point traffic
    stream (``point_rng``) over the endpoints, statistics over the endpoints taken at the
    point's own end of run, after which the point is no longer simulated (its state stays
    as it was then); ``points`` as for run_sweep. The result adds ``topology``,
    ``endpoints``, ``port_cycles_per_second`` (switch ports x cycles) and, per point,
    ``uplink_flits`` (min / max / mean flits sent on a leaf uplink)."""
    from .stats import point_stats, sweep_summary
    from .traffic import (load_trace, make_generator, output_bound, point_rng,
                          resolve_placement_seed)

    sw, run, tr, topo = cfg.switch, cfg.run, cfg.traffic, cfg.topology
    check_clos(topo, sw)
    n = topo.endpoints
    loads = parse_loads(run.loads) if tr.pattern != "trace" else [1.0]
    points = ([(load, k) for k in range(run.seeds) for load in loads] if points is None
              else [(float(load), int(k)) for load, k in points])
    B = len(points)
    warm = run.warmup if run.warmup >= 0 else run.cycles // 4
    drain = run.drain if run.drain >= 0 else run.cycles
    w0, w1 = warm, warm + run.cycles
    trace = load_trace(tr.trace_file, n) if tr.pattern == "trace" else None
    pseed = resolve_placement_seed(tr, run.seed)
    gens = [make_generator(tr, n, load, point_rng(run.seed, k, load), trace=trace,
                           placement_seed=pseed) for load, k in points]
    fab = ClosFabric(sw, cfg.link, topo, B, window=(w0, w1), src_queue=run.src_queue,
                     log=log)
    bar = _progress(w1 + drain, progress)
    t0 = time.perf_counter()
    t = 0
    S = _k.S
    ends: dict[int, tuple] = {}   # point -> (cycle, st, hist, latmax, uplinks) at its end
    while True:
        if t >= w1:
            view = fab.endpoint_view()
            st = view.s["st"]
            missing = st[:, :, S["exp_deliv"]].sum(1) - st[:, :, S["lat_cnt"]].sum(1)
            stop = not missing.any() or t >= w1 + drain
            up = fab.uplink_flits()
            for b in np.flatnonzero((missing == 0) | stop):
                if int(b) not in ends:
                    ends[int(b)] = (t, st[b].copy(), view.s["hist"][b].copy(),
                                    view.s["latmax"][b].copy(), up[b])
                    fab.net.active[b] = False          # done: not simulated further
            if stop:
                break
            c = min(CHUNK, w1 + drain - t)
        else:
            c = min(CHUNK, w1 - t)
        chunks = [g.chunk(t, c) for g in gens]
        fab.step(np.stack([x[0] for x in chunks]), np.stack([x[1] for x in chunks]))
        t += c
        if bar is not None:
            bar.update(c)
    wall = time.perf_counter() - t0
    if bar is not None:
        bar.close()
    seq_top = int(fab.s["seq_next"].max() & ((1 << _k.SRC_SHIFT) - 1))
    if int((fab.s["seq_next"] & ((1 << _k.SRC_SHIFT) - 1)).max()) >= (1 << _k.SRC_SHIFT) - 1:
        raise RuntimeError(f"a source created {seq_top} packets: more than the "
                           f"{(1 << _k.SRC_SHIFT) - 1} a Clos run numbers per source")
    view = SimpleNamespace(n=n, s={k: np.stack([ends[b][j] for b in range(B)])
                                   for j, k in ((1, "st"), (2, "hist"), (3, "latmax"))})
    out_points = []
    for b, (load, k) in enumerate(points):
        d = {"load": load, "seed": k}
        d.update(point_stats(view, b, run.cycles))
        d["offered_nominal"] = gens[b].offered
        d["end_cycle"] = ends[b][0]
        up = ends[b][4]
        d["uplink_flits"] = {"min": int(up.min()), "max": int(up.max()),
                             "mean": float(up.mean())}
        out_points.append(d)
    bound = output_bound(tr, n, pseed)
    summary = sweep_summary(out_points)
    for v in summary.values():
        v["output_bound"] = bound
    switch_ports = int(fab.nports.sum())
    return {
        "config": cfg.as_dict(),
        "topology": {"kind": "clos", "endpoints": n, "leaves": fab.leaves,
                     "spines": fab.spines, "endpoints_per_leaf": fab.epl,
                     "radix": topo.radix, "routing": topo.routing,
                     "oversubscription": topo.oversubscription,
                     "switch_ports": switch_ports},
        "endpoints": n,
        "seed": run.seed,
        "placement_seed": pseed,
        "output_bound": bound,
        "engine": "numba",
        "iterations": fab.iterations,
        "window": [w0, w1],
        "cycles_simulated": t,
        "batch": B,
        "wall_seconds": wall,
        "point_cycles_per_second": B * t / wall if wall > 0 else None,
        "port_cycles_per_second": B * t * switch_ports / wall if wall > 0 else None,
        "points": out_points,
        "summary": summary,
        "fabric": fab,
    }


def run_clos_trace(switch: SwitchParams, topo: TopologyParams, packets, cycles: int, *,
                   link: LinkParams | None = None, ready=None,
                   groups: dict | None = None) -> ClosFabric:
    """Run one trace of packets ``(cycle, src, dest, size)`` (unicast) or ``(cycle, src,
    dest, size, kind)`` (kind 0 unicast, 1 multicast to global group ``dest`` of
    ``groups``: group id -> member endpoints) (endpoint numbers; a source's packets in
    trace order, same-cycle ones on the next free cycles, as :func:`~.exact.run_trace`)
    through one Clos with the departure log; return it."""
    from .exact import _dense

    n = topo.leaves * topo.endpoints_per_leaf
    rows = [(p[0], p[1], p[2], p[3], p[4] if len(p) > 4 else 0) for p in packets]
    gdest, gsize, gkind = _dense(rows, n, cycles)
    # departures: at most 3 per unicast flit; per multicast flit one per member, one up
    # and one down per leaf
    hops = 1024 + sum(int(p[3]) * (3 if p[4] != 1 else
                                   len((groups or {}).get(p[2], ())) + 1 + topo.leaves)
                      for p in rows)
    fab = ClosFabric(switch, link, topo, 1, log=True, log_capacity=hops,
                     src_queue=max(16, len(packets) + 1), groups=groups)
    fab.step(gdest, gsize, None if ready is None else np.asarray(ready, bool)[None, :cycles],
             gkind=gkind if any(p[4] for p in rows) else None)
    return fab
