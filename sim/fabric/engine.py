"""The fabric model's state and driver: a batch of independent switches plus links.

:class:`Fabric` holds every register of ``batch`` switches (each with its links, source
queues and statistics) as numpy arrays with a leading batch dimension, and advances them
one chunk of cycles at a time through the numba-compiled kernel
(:mod:`fusionfabric.sim.fabric.kernel`). The rules are those of docs/switch.md, cycle for
cycle; the link adds latency, credits and framing slots.
"""

from __future__ import annotations

import numpy as np

from . import kernel as _k
from .config import ConfigError, LinkParams, SwitchParams, max_iterations

__all__ = ["link_slots", "Fabric", "Departures"]


class Departures:
    """Every ``o_port`` handshake of a run: cycle, output, source port and flit fields."""

    def __init__(self, t, o, src, info, b):
        self.cycle = t
        self.out = o
        self.src = src
        self.info = info
        self.batch = b
        f = {k: (info >> np.int64(off)) & np.int64((1 << w) - 1) for k, (off, w) in
             _k.INFO.items()}
        self.seq, self.flit, self.first, self.last = f["seq"], f["flit"], f["first"], f["last"]
        self.kind, self.dest = f["kind"], f["dest"]

    def __len__(self):
        return int(self.cycle.size)

    def rows(self, b: int = 0):
        """``(cycle, out, src, seq, flit)`` tuples of batch point ``b``, in log order."""
        m = self.batch == b
        return list(zip(self.cycle[m].tolist(), self.out[m].tolist(), self.src[m].tolist(),
                        self.seq[m].tolist(), self.flit[m].tolist()))


def link_slots(n_ports: int, port_lanes=None, full_lanes: int | None = None) -> np.ndarray:
    """The link slots of each port, ``(n_ports, R)`` bool, cycle ``t`` at column ``t % R``.

    A port of ``l`` lanes, where a full-rate port has ``R`` (``full_lanes``), may move a flit
    each way at cycle ``t`` when ``(t * l) mod R >= R - l``: ``l`` slots in every ``R``
    cycles, spread evenly (the cycles at which ``floor(t * l / R)`` steps up, counted from
    the one before). ``None``: one column of ones (every port at the full rate)."""
    if port_lanes is None:
        return np.ones((n_ports, 1), np.bool_)
    lanes = [int(x) for x in port_lanes]
    if len(lanes) != n_ports:
        raise ValueError(f"port_lanes has {len(lanes)} entries for {n_ports} ports")
    R = int(full_lanes) if full_lanes is not None else max(lanes)
    for p, l in enumerate(lanes):
        if not 1 <= l <= R:
            raise ValueError(f"port_lanes[{p}]={l} is outside 1..{R} (full_lanes)")
    t = np.arange(R)
    return np.stack([(t * l) % R >= R - l for l in lanes]).astype(np.bool_)


class Fabric:
    """``batch`` independent copies of one switch configuration with their links.

    Parameters
    ----------
    switch : SwitchParams
        Same names as the RTL (``n_ports``, ``depth``, ``iterations``, ``mode``,
        ``out_depth``, ``n_groups``, ``pipeline``, ``reduce``, ``n_chunks``).
    link : LinkParams
        ``latency`` (cycles, each way), ``credits`` (0: ``2*latency+1``), ``frame_period``,
        ``admission`` (``fifo``: one source queue of ``src_queue`` packets per port, the
        RTL's endpoint; ``voq``: one source queue of ``src_voq_depth`` packets per
        destination and per-destination credits for the switch's VOQs, unicast only,
        ``switch.mode`` voq; the kernel docstring).
    batch : int
        Independent sweep points simulated together.
    groups : dict[int, iterable of int or dict]
        Group table (static for the run): group id -> member ports, or a dict
        ``{"members": ports, "mode": 0 ALLREDUCE or 1 REDUCE, "root": port}`` (the entry's
        reduction fields, used by ``switch.reduce``).
    window : (int, int)
        Sample period ``[w0, w1)`` of the statistics (cycles).
    src_queue : int
        Source-queue capacity per port, in packets (overflow is counted, never silent);
        admission ``voq``: not used (``link.src_voq_depth`` per destination instead).
    log : bool
        Keep every departure (for the exactness check); ``log_capacity`` entries.
    parallel : bool
        Run the batch points on numba threads when there are 4 or more and no log.
    port_lanes : sequence of int, optional
        Lanes of each port (``n_ports`` entries, 1..``full_lanes``): port ``p`` moves a flit
        each way only in ``port_lanes[p]`` of every ``full_lanes`` cycles (:func:`link_slots`).
        Default: every port at the full rate, one flit per cycle.
    full_lanes : int, optional
        Lanes of a full-rate port (one flit per cycle); default ``max(port_lanes)``.

    Members
    -------
    s : dict[str, numpy.ndarray]
        The registers by name (the fields of :class:`~fusionfabric.sim.fabric.kernel.State`);
        the kernel updates these arrays in place.
    """

    HIST = 1 << 16

    def __init__(self, switch: SwitchParams, link: LinkParams | None = None, batch: int = 1,
                 *, groups: dict | None = None, window: tuple[int, int] = (0, 1 << 62),
                 src_queue: int = 4096, log: bool = False, log_capacity: int = 1 << 20,
                 parallel: bool = True, port_lanes=None, full_lanes: int | None = None):
        link = link or LinkParams()
        self.parallel = parallel
        n = switch.n_ports
        self.switch, self.link, self.batch, self.n = switch, link, int(batch), n
        self.crosspoint = xp = switch.mode == "crosspoint"
        if switch.mode not in ("voq", "fifo", "crosspoint"):
            raise ConfigError(f"switch.mode={switch.mode!r} is not one of: voq, fifo, "
                              f"crosspoint")
        self.pipelined = pl = bool(getattr(switch, "pipeline", False))
        if pl and switch.mode != "voq":
            raise ConfigError(f"switch.pipeline=true needs switch.mode=voq (switch.mode="
                              f"{switch.mode!r})")
        if pl and switch.iterations > 1:
            raise ConfigError(f"switch.iterations={switch.iterations}: switch.pipeline=true "
                              f"runs one iSLIP round (0 or 1)")
        if xp and switch.iterations:
            raise ConfigError(f"switch.iterations={switch.iterations}: switch.mode="
                              f"'crosspoint' has no iSLIP (leave it 0)")
        iters = switch.iterations or min(3, max_iterations(n))
        if not 1 <= iters <= max_iterations(n):
            raise ValueError(f"iterations={iters} must be in 1..{max_iterations(n)} "
                             f"for n_ports={n}")
        self.iterations = 1 if pl else iters
        fifo = switch.mode == "fifo"
        self.reduce = rd = bool(getattr(switch, "reduce", False))
        if rd and (switch.mode != "voq" or pl):
            raise ConfigError(f"switch.reduce=true is modelled with switch.mode=voq and "
                              f"switch.pipeline=false only (switch.mode={switch.mode!r}, "
                              f"switch.pipeline={str(pl).lower()})")
        if rd and link.admission == "voq":
            raise ConfigError("link.admission='voq' is modelled with switch.reduce=false "
                              "only")
        n_chunks = int(getattr(switch, "n_chunks", 16))
        if rd and not 1 <= n_chunks <= 64:
            raise ConfigError(f"switch.n_chunks={n_chunks} is outside 1..64")
        self.admission = adm = link.admission == "voq"
        if link.admission not in ("fifo", "voq"):
            raise ConfigError(f"link.admission={link.admission!r} is not one of: fifo, voq")
        if adm and pl:
            raise ConfigError("link.admission='voq' is modelled with switch.pipeline=false "
                              "only")
        if adm and (fifo or xp):
            raise ConfigError(f"link.admission='voq' needs switch.mode=voq (switch.mode="
                              f"{switch.mode!r} has no VOQs to hold per-destination credits "
                              f"for)")
        SV = int(link.src_voq_depth)
        if adm and SV < 1:
            raise ConfigError(f"link.src_voq_depth={SV} is below the minimum 1")
        cap = n * switch.depth if fifo else switch.depth
        nq = 1 if fifo else n
        L = link.latency
        K = link.credits or 2 * L + 1
        B = self.batch
        G = switch.n_groups
        self.members = np.zeros((G, n), dtype=np.bool_)
        self.gvalid = np.zeros(G, dtype=np.bool_)
        gmode = np.zeros(G, dtype=np.int64)
        groot = np.zeros(G, dtype=np.int64)
        for g, mem in (groups or {}).items():
            if not 0 <= g < G:
                raise ValueError(f"group {g} is outside 0..{G - 1} (n_groups={G})")
            if isinstance(mem, dict):       # a reduction group: members, mode, root
                gmode[g] = int(mem.get("mode", 0))
                groot[g] = int(mem.get("root", 0))
                mem = mem["members"]
            for m in mem:
                if not 0 <= m < n:
                    raise ValueError(f"group {g} member {m} is outside 0..{n - 1}")
                self.members[g, m] = True
            self.gvalid[g] = True
        self.p = np.zeros(len(_k.P), dtype=np.int64)
        pv = dict(N=n, FIFO=int(fifo), CAP=cap, ITERS=iters, OUT_DEPTH=switch.out_depth,
                  L=L, FRAME=link.frame_period, K=K, SQ=src_queue, H=self.HIST,
                  W0=window[0], W1=window[1], LOG=int(log), T0=0, C=0, USE_READY=0, G=G,
                  ADM=int(adm), SV=SV)
        for k, v in pv.items():
            self.p[_k.P[k]] = v
        z = np.zeros
        i64 = np.int64
        self.port_lanes = None if port_lanes is None else [int(x) for x in port_lanes]
        self.groups = _k.Groups(self.members, self.gvalid,
                                link_slots(n, self.port_lanes, full_lanes))
        W = (n + 63) // 64
        # the queues a mode does not use get size-1 axes (same kernel types, no memory)
        sq = 1 if adm else src_queue
        nd, sv = (n, SV) if adm else (1, 1)
        # the crossbar's rows and columns: 2n with the reduction units (n + u: unit u)
        nx = 2 * n if rd else n
        if rd:
            nq = nx
        self.state = _k.State(
            q_gen=z((B, nx, nq, cap), i64), q_info=z((B, nx, nq, cap), i64),
            q_head=z((B, nx, nq), i64), q_cnt=z((B, nx, nq), i64),
            ne=z((B, n, (n + 63) // 64), np.uint64),
            done=z((B, nx, nx), np.bool_), hdone=z((B, n, n), np.bool_),
            ob_gen=z((B, nx, switch.out_depth), i64),
            ob_info=z((B, nx, switch.out_depth), i64),
            ob_src=z((B, nx, switch.out_depth), i64), ob_head=z((B, nx), i64),
            ob_cnt=z((B, nx), i64),
            credit=np.full((B, nx), switch.out_depth, i64), lock=np.full((B, nx), -1, i64),
            gptr=z((B, nx), i64), aptr=z((B, nx), i64),
            sq_dest=z((B, n, sq), i64), sq_size=z((B, n, sq), i64),
            sq_kind=z((B, n, sq), i64), sq_gen=z((B, n, sq), i64),
            sq_seq=z((B, n, sq), i64), sq_head=z((B, n), i64), sq_cnt=z((B, n), i64),
            sq_flit=z((B, n), i64), seq_next=z((B, n), i64),
            sv_size=z((B, n, nd, sv), i64), sv_gen=z((B, n, nd, sv), i64),
            sv_seq=z((B, n, nd, sv), i64), sv_head=z((B, n, nd), i64),
            sv_cnt=z((B, n, nd), i64), sv_ne=z((B, n, W), np.uint64),
            sv_ptr=z((B, n), i64), sv_cur=np.full((B, n), -1, i64), sv_flit=z((B, n), i64),
            sc=np.full((B, n, nd), switch.depth, i64), sc_ret=np.full((B, n, L + 2), -1, i64),
            lp_valid=z((B, n, L + 1), np.bool_), lp_gen=z((B, n, L + 1), i64),
            lp_info=z((B, n, L + 1), i64), tcred=np.full((B, n), K, i64),
            cr_ret=z((B, n, L + 2), i64),
            rx_gen=z((B, n, K), i64), rx_info=z((B, n, K), i64), rx_head=z((B, n), i64),
            rx_cnt=z((B, n), i64),
            ecred=np.full((B, n), K, i64), ecr_ret=z((B, n, 2 * L + 2), i64),
            st=z((B, n, _k.NSTAT), i64), hist=z((B, self.HIST), i64), latmax=z(B, i64),
        )
        self.xstate = None
        if xp:
            # the crosspoint switch's own registers; its crosspoint buffers are the
            # q_* arrays, queue (i, o) of depth flits
            b_ = np.bool_
            self.xstate = _k.XState(
                p_valid=z((B, n), b_), p_gen=z((B, n), i64), p_info=z((B, n), i64),
                e_valid=z((B, n, 2), b_), e_gen=z((B, n, 2), i64), e_info=z((B, n, 2), i64),
                e_target=z((B, n, 2, n), b_), e_drops=z((B, n, 2), i64),
                hsel=z((B, n), i64), ready=np.ones((B, n), b_), fill=z((B, n), i64),
                took=z((B, n), b_), took_drops=z((B, n), i64), stalled=z((B, n), b_),
                lag=np.full((B, n, n), switch.depth, i64), notfull=np.ones((B, n, n), b_),
                owe=z((B, n, n), b_), back=z((B, n, n), b_), xpop=z((B, n, n), b_),
                swe=z((B, n, n), b_), cnt=z((B, n, n), i64),
                sel=np.full((B, n), -1, i64), ptr=z((B, n), i64), lock_v=z((B, n), b_),
                lock_k=np.full((B, n), -1, i64),
                c1=np.full((B, n), switch.out_depth >= 1, b_),
                c2=np.full((B, n), switch.out_depth >= 2, b_),
                clag=np.full((B, n), switch.out_depth, i64), charged=z((B, n), b_),
                returned=z((B, n), b_), pipe_v=z((B, n, 4), b_), pipe_gen=z((B, n, 4), i64),
                pipe_info=z((B, n, 4), i64), pipe_src=z((B, n, 4), i64))
        self.pstate = None
        if pl:
            # the pipelined switch's own registers; its VOQ slots are the q_* arrays
            b_ = np.bool_
            self.pstate = _k.PState(
                e_valid=z((B, n, 2), b_), e_gen=z((B, n, 2), i64), e_info=z((B, n, 2), i64),
                e_drops=z((B, n, 2), i64), e_rem=z((B, n, 2, n), b_),
                e_pick=np.full((B, n, 2), -1, i64), e_last=z((B, n, 2), b_),
                hsel=z((B, n), i64), took=z((B, n), b_), took_drops=z((B, n), i64),
                stalled=z((B, n), b_), wptr=z((B, n, n), i64), sptr=z((B, n, n), i64),
                rptr=z((B, n, n), i64), notfull=np.ones((B, n, n), b_),
                meta=z((B, n, n, cap), i64), meta_any=z((B, n, n), i64),
                valid_r=z((B, n, n), b_), single_r=z((B, n, n), b_), kill_r=z((B, n), b_),
                grant_r=np.full((B, n), -1, i64), match1=np.full((B, n), -1, i64),
                meta1=z((B, n), i64), phase=z(B, i64), gptr=z((B, 2, n), i64),
                aptr=z((B, 2, n), i64), lock_v=z((B, n), b_),
                lock_in=np.full((B, n), -1, i64), pipe_v=z((B, n, 8), b_),
                pipe_gen=z((B, n, 8), i64), pipe_info=z((B, n, 8), i64),
                pipe_src=z((B, n, 8), i64))
        self.rstate = None
        if rd:
            # the reduction units (rtl/reduce/unit.py) and their result FIFOs; the
            # pipeline from the streamer to o_result is 3 + 5 depth advancing cycles
            b_ = np.bool_
            depth_u = max(1, (n - 1).bit_length())
            R = 3 + 5 * depth_u + 1
            C_ = n_chunks
            self.rstate = _k.RState(
                gmode=gmode, groot=groot, s1_v=z((B, n), b_), s1_info=z((B, n), i64),
                s1_src=z((B, n), i64), sl_state=z((B, n, C_), i64),
                sl_group=z((B, n, C_), i64), sl_chunk=z((B, n, C_), i64),
                sl_arr=z((B, n, C_, n), b_), sl_cnt=z((B, n, C_), i64),
                sl_k=z((B, n, C_), i64), rf_buf=z((B, n, C_), i64), rf_head=z((B, n), i64),
                rf_cnt=z((B, n), i64), sa=z((B, n), b_), sslot=z((B, n), i64),
                srank=z((B, n), i64), sk=z((B, n), i64), pr_v=z((B, n, R), b_),
                pr_info=z((B, n, R), i64), acnt=z((B, n), i64), rq_info=z((B, n, 4), i64),
                rq_head=z((B, n), i64), rq_cnt=z((B, n), i64), ust=z((B, n, 7), i64))
        self.s = self.state._asdict()
        self.log_capacity = log_capacity if log else 1
        self.departure_log = _k.Log(*(z(self.log_capacity, i64) for _ in range(5)), z(1, i64))
        self.log = self.departure_log._asdict()
        self.t = 0

    # -- running ---------------------------------------------------------------------------
    def step(self, gdest, gsize, gkind=None, ready=None) -> None:
        """Advance ``C`` cycles; arrays are ``(batch, C, n_ports)``.

        ``gdest``/``gsize``: packets created per (point, cycle, source) (size 0: none);
        ``gkind``: 0 unicast (default), 1 multicast (``gdest`` is then a group id), 2/3
        REDUCE/RESULT (dropped and counted without reduction units; with
        ``switch.reduce`` a REDUCE packet's ``gdest`` is ``group | chunk << 8``, its flit
        ``f`` a contribution to chunk ``chunk + f``); ``ready``: ``o_port`` ready
        pattern (default: always ready). Admission ``voq``: unicast packets to ports
        ``0 .. n_ports-1`` only (anything else raises :class:`ValueError`).
        """
        gdest = np.ascontiguousarray(gdest, dtype=np.int64)
        gsize = np.ascontiguousarray(gsize, dtype=np.int64)
        B, C, n = gdest.shape
        if (B, n) != (self.batch, self.n) or gsize.shape != gdest.shape:
            raise ValueError(f"traffic chunk shape {gdest.shape} does not match batch "
                             f"{self.batch} x cycles x {self.n} ports")
        gkind = (np.zeros_like(gdest) if gkind is None
                 else np.ascontiguousarray(gkind, dtype=np.int64))
        if self.admission:
            m = gsize > 0
            if np.any(gkind[m] != 0):
                raise ValueError("link.admission='voq' models unicast traffic only "
                                 "(gkind 0); multicast and reduction kinds are refused")
            bad = gdest[m][(gdest[m] < 0) | (gdest[m] >= n)]
            if bad.size:
                raise ValueError(f"link.admission='voq': destination {int(bad[0])} is "
                                 f"outside 0..{n - 1}")
        if ready is None:
            ready_arr = np.ones((1, 1, 1), dtype=np.bool_)
            use_ready = 0
        else:
            ready_arr = np.ascontiguousarray(ready, dtype=np.bool_)
            use_ready = 1
            if ready_arr.shape != gdest.shape:
                raise ValueError(f"ready shape {ready_arr.shape} != {gdest.shape}")
        self.p[_k.P["T0"]] = self.t
        self.p[_k.P["C"]] = C
        self.p[_k.P["USE_READY"]] = use_ready
        traffic = _k.Traffic(gdest, gsize, gkind, ready_arr)
        args = (self.p, self.groups, traffic, self.state, self.departure_log)
        if self.reduce:
            rargs = (self.p, self.groups, traffic, self.state, self.rstate,
                     self.departure_log)
            if self.parallel and B >= 4 and not self.p[_k.P["LOG"]]:
                _k.run_rd_chunk_parallel(*rargs)
            else:
                _k.run_rd_chunk(*rargs)
        elif self.pipelined:
            pargs = (self.p, self.groups, traffic, self.state, self.pstate,
                     self.departure_log)
            if self.parallel and B >= 4 and not self.p[_k.P["LOG"]]:
                _k.run_pl_chunk_parallel(*pargs)
            else:
                _k.run_pl_chunk(*pargs)
        elif self.crosspoint:
            xargs = (self.p, self.groups, traffic, self.state, self.xstate,
                     self.departure_log)
            if self.parallel and B >= 4 and not self.p[_k.P["LOG"]]:
                _k.run_xp_chunk_parallel(*xargs)
            else:
                _k.run_xp_chunk(*xargs)
        elif self.parallel and B >= 4 and not self.p[_k.P["LOG"]]:
            _k.run_chunk_parallel(*args)
        else:
            _k.run_chunk(*args)
        self.t += C
        if self.log["n"][0] > self.log_capacity and self.p[_k.P["LOG"]]:
            raise RuntimeError(f"departure log overflow: {int(self.log['n'][0])} > "
                               f"capacity {self.log_capacity}")

    def set_window(self, w0: int, w1: int) -> None:
        self.p[_k.P["W0"]] = w0
        self.p[_k.P["W1"]] = w1

    # -- results ---------------------------------------------------------------------------
    def departures(self) -> Departures:
        n = min(int(self.log["n"][0]), self.log_capacity)
        lg = self.log
        order = np.lexsort((lg["o"][:n], lg["t"][:n], lg["b"][:n]))
        return Departures(lg["t"][:n][order], lg["o"][:n][order], lg["src"][:n][order],
                          lg["info"][:n][order], lg["b"][:n][order])

    def stat(self, name: str) -> np.ndarray:
        """One per-port statistics column, shape ``(batch, n_ports)``."""
        return self.s["st"][:, :, _k.S[name]].copy()

    def in_flight(self) -> np.ndarray:
        """Flits inside the fabric per batch point (source queues excluded)."""
        s = self.s
        n = (s["q_cnt"].sum(axis=(1, 2)) + s["ob_cnt"].sum(axis=1)
             + s["rx_cnt"].sum(axis=1) + s["lp_valid"].sum(axis=(1, 2)))
        if self.pstate is not None:     # VOQs by their pointers, the input stage, matches
            x = self.pstate
            n = (s["ob_cnt"].sum(axis=1) + s["rx_cnt"].sum(axis=1)
                 + s["lp_valid"].sum(axis=(1, 2)) + (x.wptr - x.sptr).sum(axis=(1, 2))
                 + x.e_valid.sum(axis=(1, 2)) + x.pipe_v.sum(axis=(1, 2)))
        if self.rstate is not None:     # the units' ingest registers and result FIFOs
            x = self.rstate
            n = n + x.s1_v.sum(axis=1) + x.rq_cnt.sum(axis=1) + x.pr_v.sum(axis=(1, 2))
        if self.xstate is not None:     # the input register and stage, pops in flight
            x = self.xstate
            n = (n + x.p_valid.sum(axis=1) + x.e_valid.sum(axis=(1, 2))
                 + x.pipe_v.sum(axis=(1, 2)))
        return n

    def backlog(self) -> np.ndarray:
        """Packets waiting in source queues per batch point."""
        if self.admission:
            return self.s["sv_cnt"].sum(axis=(1, 2))
        return self.s["sq_cnt"].sum(axis=1)

    def credits_ok(self) -> bool:
        """Credit conservation: credit[o] + occupancy(o) == out_depth everywhere."""
        s = self.s
        return bool(np.all(s["credit"] + s["ob_cnt"] == self.switch.out_depth))
