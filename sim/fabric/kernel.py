"""The cycle kernel: one switch plus its links, every rule of docs/switch.md, per cycle.

Written as plain scalar loops over ``(batch point, cycle, port)`` and compiled by numba
(``njit(cache=True)``; batch points on threads with ``prange`` when no departure log is
kept). ``_cycles`` advances the switches of one batch point by one chunk of cycles, in
every cycle one switch after the other: the single switch is one switch (``run_chunk``), a
two-tier Clos (sim/fabric/clos.py, ``run_clos_chunk``) all of its switches, with the same
rules; only the ports that face another switch (their link's sender is that switch's
output stage) and the ingress routing differ (``_route``). ``_cycles`` binds every array
of the tuples to a local name once per call and calls no function with an array argument
inside its loops: numba updates an array's reference count (an atomic operation) each
time one is taken from a tuple or passed to a function, which inside the loops would cost
about a third of a Clos point's run time at moderate load.
:class:`fusionfabric.sim.fabric.engine.Fabric` owns the arrays and passes them as four
named tuples of arrays: :class:`Groups` (the multicast table), :class:`Traffic` (one chunk of
created packets and the output-ready pattern), :class:`State` (every register of the
switches, links and source queues, and the statistics) and :class:`Log` (the departure log).
The field lists below are the kernel's one signature.

Order of evaluation inside cycle ``t`` (every decision reads the state at the start of t;
writes take effect for t+1, as in the RTL):

1. traffic: packets created in t enter their source queue (overflow: counted drop);
   admission ``voq``: the source's queue for the packet's destination;
2. link, sender side: credits returned for t arrive; a source with a credit, no framing
   slot and a link slot of its port's rate puts its next flit on the link; flits that left
   ``latency`` cycles ago enter the link's receive FIFO, whose head is ``i_port[i]``
   (latency 0: same cycle). Admission ``voq``: the per-destination credits returned for t
   arrive too; a source not inside a packet picks, round robin from its pointer, the
   first destination whose queue is non-empty and whose credits cover its head packet
   (``min(size, depth)`` flits), and moves the pointer one past it; the packet's flits then
   go back to back, each taking a link credit and a credit of its destination;
3. output stage: ``o_port[o]`` valid = output buffer non-empty; ready = the output-ready
   pattern, no framing slot, a link slot of the port's rate and an egress credit; a
   handshake pops, delivers at ``t + latency`` and returns one switch credit for t+1;
4. allocator: requests from VOQ counts, credits and locks at the start of t; iSLIP rounds;
   round-1 matches move the pointers; matched heads move to the output buffers
   (credit - 1), VOQs pop (FIFO mode: per-member ``hdone``), unicast flits lock/unlock;
   admission ``voq``: a pop of VOQ (i, o) returns one credit for destination o to source
   i, usable at t + latency + 1;
5. ingress: ``i_port[i]`` head is routed (drops counted), the VOQ space check uses the
   count at the start of t (a pop in t does not free space for t), multicast copies are
   written one per cycle lowest member first; a handshake pops the receive FIFO and sends
   the link credit back (usable by the sender at t + latency + 1); admission ``voq``: a
   unicast flit always finds space (its VOQ slot was reserved by the source's credit);
6. credits: ``credit[o] += handshakes of step 3``.

Admission (``[link] admission``, parameter ``ADM``): ``fifo`` (0) is the RTL's endpoint,
one source queue in front of the link; ``voq`` (1, model only, one switch in VOQ mode,
unicast only) gives every source one queue of ``SV`` packets per destination and holds
per-destination credits ``sc[i, d]`` = free slots of the switch's VOQ (i, d), so the link
never carries a flit that its VOQ cannot take (no head-of-line blocking at the link).

The two registered switch designs have a function each, with the same source queues,
links and output stage (steps 1 to 3) and their own registers in a fifth tuple:
``_xp_point`` (:class:`XState`) the crosspoint-buffered switch
(rtl/switch/crosspoint_switch.py: input register, two-entry input stage, a buffer per
crosspoint in the ``q_*`` arrays, an arbiter per output) and ``_pl_point``
(:class:`PState`) the pipelined VOQ switch (rtl/switch/pipelined.py: two-entry input
stage, VOQs with write, schedule and read counts, one iSLIP round split into a grant and
an accept stage of two alternating sub-schedulers). Both follow their RTL register for
register (docs/model.md); one switch only, admission ``fifo``. The VOQ switch with
reduction units (rtl/switch/voq_switch.py with ``reduce=True``) is ``_rd_point``
(:class:`RState`): the same VOQ rules over a ``2n x 2n`` crossbar whose rows and columns
``n + u`` are unit ``u``'s results and contributions, and the units themselves
(rtl/reduce/unit.py: ingest register, open-chunk table, ready FIFO, streamer, pipeline,
result FIFO), in the RTL's cycles.

In a Clos, a port that faces another switch has no source queue: in step 2 its receive
FIFO takes the flits the upstream switch's output stage put on the link ``L2`` cycles
earlier, and in step 3 its output stage sends with the downstream input's link credits
(returned by that input's ingress, usable ``L2 + 1`` cycles later). With ``L2 >= 1`` no
switch reads what another wrote in the same cycle, so the switches' order does not matter.
The group table then has ``G`` rows per switch (``members[s * G + g]``, sim/fabric/clos.py,
``clos_group_tables``): a multicast flit is copied, lowest port first, to its switch's row
of the group, a spine skipping the flit's own leaf and a leaf adding one copy up the
routed uplink, last, for a flit from an endpoint (docs/model.md, "Multicast").
"""

from __future__ import annotations

from collections import namedtuple

import numba
import numpy as np

__all__ = ["run_chunk", "run_chunk_parallel", "run_clos_chunk", "run_clos_chunk_parallel",
           "run_xp_chunk", "run_xp_chunk_parallel", "run_pl_chunk", "run_pl_chunk_parallel",
           "run_rd_chunk", "run_rd_chunk_parallel", "P", "S", "INFO", "pack_info", "Groups",
           "Traffic", "State", "XState", "PState", "RState", "RESULT_TAG", "CHUNK_SHIFT",
           "Log", "Net", "ecmp_hash", "SRC_SHIFT", "SRC_MASK"]

# integer parameters, packed in one int64 array (index names)
P = {name: k for k, name in enumerate((
    "N", "FIFO", "CAP", "ITERS", "OUT_DEPTH", "L", "FRAME", "K", "SQ", "H", "W0", "W1",
    "LOG", "T0", "C", "USE_READY", "G", "ECRED",
    # Clos (sim/fabric/clos.py): 16-bit destinations, topology 1, routing (0 deterministic,
    # 1 ECMP, 2 adaptive), endpoints per leaf, spines, endpoints, switch-to-switch link
    # latency and credits, switches per batch point
    "DBITS16", "TOPO", "ROUTING", "EPL", "SPINES", "NE", "L2", "K2", "NSW",
    # admission: 0 fifo (one source queue), 1 voq (source queues and credits per
    # destination); packets per source queue per destination
    "ADM", "SV"))}

# per-port statistics columns (the RTL's o_stats first, then the model's)
S = {name: k for k, name in enumerate((
    "flits_in", "flits_out", "in_stalls", "out_stalls", "drop_dest", "drop_group",
    "drop_kind",
    "gen_flits",        # flits created in the sample window, per source
    "gen_pkts",         # packets created in the sample window, per source
    "acc_flits",        # flits delivered in the sample window, per destination
    "src_drop_pkts",    # packets refused by a full source queue (any time), per source
    "src_drop_flits",
    "lat_sum",          # sum of latencies of sampled packets, per destination
    "lat_cnt",          # sampled packet deliveries, per destination
    "exp_deliv",        # sampled deliveries expected (copies), per source
    "inj_flits",        # flits put on the link in the sample window, per source
))}
NSTAT = len(S)

# flit info word: seq [0:32], flit index [32:44], first [44], last [45], kind [46:48],
# dest [48:56]
INFO = {"seq": (0, 32), "flit": (32, 12), "first": (44, 1), "last": (45, 1),
        "kind": (46, 2), "dest": (48, 8)}


def pack_info(seq, flit, first, last, kind, dest):
    return ((seq & 0xFFFFFFFF) | ((flit & 0xFFF) << 32) | ((first & 1) << 44)
            | ((last & 1) << 45) | ((kind & 3) << 46) | ((dest & 0xFF) << 48))


# count trailing zeros of a one-hot uint64 by de Bruijn multiplication
_DB = np.uint64(0x03F79D71B4CB0A89)
_DB_TABLE = np.zeros(64, np.int64)
for _i in range(64):
    _DB_TABLE[((1 << _i) * 0x03F79D71B4CB0A89 % (1 << 64)) >> 58] = _i


#: The static tables of a run: the multicast group table ``members[g, o]``, ``gvalid[g]``,
#: and the link slots of each endpoint port, ``slots[port, t % R]`` (``R`` =
#: ``slots.shape[1]``): a port of ``l`` lanes of the widest port's ``R`` moves a flit in
#: ``l`` of every ``R`` cycles, each way (docs/model.md, "Ports of different rates"); one
#: column of ones when every port runs at the full rate.
Groups = namedtuple("Groups", ("members", "gvalid", "slots"))
#: One chunk of ``C`` cycles, arrays ``(batch, C, n_ports)``: packets created (destination,
#: size in flits (0: none), kind) and the ``o_port`` ready pattern (``(1, 1, 1)`` when the
#: parameter ``USE_READY`` is 0).
Traffic = namedtuple("Traffic", ("gdest", "gsize", "gkind", "ready"))
#: Every register of ``batch`` switches with their links, by block (leading axis: batch):
#: VOQs ``q_*`` (FIFO mode: one queue, ``hdone`` the multicast copies written), their
#: non-empty bits ``ne[b, o, word]`` per output, the ingress multicast progress ``done``;
#: output buffers ``ob_*``, switch credits ``credit``, the unicast packet ``lock`` per output,
#: the iSLIP pointers ``gptr``/``aptr``; source queues ``sq_*`` and ``seq_next``; admission
#: ``voq``: per-destination source queues ``sv_*[b, i, d, slot]`` (``sv_ne[b, i, word]``
#: non-empty bits per destination, round-robin pointer ``sv_ptr``, the destination of the
#: packet being sent ``sv_cur`` (-1: none) and its next flit ``sv_flit``), credits
#: ``sc[b, i, d]`` with their return ring ``sc_ret[b, i, slot]`` (the destination, -1:
#: none; at most one VOQ pop per input per cycle) (admission ``fifo``: size-1 axes); the link:
#: delay line ``lp_*``, link credits ``tcred`` with their return ring ``cr_ret``, receive FIFO
#: ``rx_*``, egress credits ``ecred`` with ``ecr_ret``; statistics ``st[b, port, S[...]]``,
#: the latency histogram ``hist`` and the largest latency ``latmax``.
State = namedtuple("State", (
    "q_gen", "q_info", "q_head", "q_cnt", "ne", "done", "hdone",
    "ob_gen", "ob_info", "ob_src", "ob_head", "ob_cnt", "credit", "lock", "gptr", "aptr",
    "sq_dest", "sq_size", "sq_kind", "sq_gen", "sq_seq", "sq_head", "sq_cnt", "sq_flit",
    "seq_next",
    "sv_size", "sv_gen", "sv_seq", "sv_head", "sv_cnt", "sv_ne", "sv_ptr", "sv_cur",
    "sv_flit", "sc", "sc_ret",
    "lp_valid", "lp_gen", "lp_info", "tcred", "cr_ret", "rx_gen", "rx_info", "rx_head",
    "rx_cnt", "ecred", "ecr_ret",
    "st", "hist", "latmax"))
#: The wiring of a Clos batch point's switches (leaves first, then spines), per switch
#: ``s``: ports ``nports[s]``, iSLIP rounds ``iters[s]``, endpoint ports ``nep[s]`` (ports
#: ``0 .. nep-1``, endpoints ``e0[s] ..``); output ``o >= nep``
#: feeds input ``peer_p[s, o]`` of switch ``peer_s[s, o]``.
#: Per state index (``point * switches + s``): ``occ[b, o]`` flits queued in the switch for
#: output ``o`` (VOQs plus output buffer; adaptive routing), ``hold[b, i]`` the uplink of
#: the packet passing input ``i``. ``active[pt]``: batch point ``pt`` is simulated (a sweep
#: stops simulating a point once its statistics are taken).
Net = namedtuple("Net", ("nports", "nep", "e0", "iters", "peer_s", "peer_p", "occ", "hold",
                         "active"))
#: Clos: a flit's source endpoint rides in bits ``SRC_SHIFT ..`` of its 32-bit sequence
#: number (its source's packet count in the low bits), for ECMP and the checks.
SRC_SHIFT = 20
SRC_MASK = 0xFFF
#: Departure log: cycle, output, source port, flit info word and batch point per entry;
#: ``n[0]`` counts entries (also beyond the capacity, to detect an overflow).
Log = namedtuple("Log", ("t", "o", "src", "info", "b", "n"))


def _route(d, info, e0, nep, NE, EPL, SPINES, ROUTING):
    """Output port of a unicast flit for destination endpoint ``d`` at a Clos switch (-1:
    no such endpoint; -2: adaptive, the caller chooses). A spine (``nep == 0``) sends down
    to leaf ``d // EPL`` (its port); a leaf sends a local destination to its port and any
    other up a spine port ``nep + k``: ``d mod SPINES`` (deterministic), the ECMP hash of
    (source, ``d``), or (adaptive, in ``_cycles``) the uplink with the fewest flits queued
    for it in the leaf (VOQs of every input plus its output buffer, ``occ[b]``; ties to the
    first in cyclic order from the flow's ECMP uplink), chosen at the packet's first flit
    and held in ``hold[b, i]`` for its other flits. Scalars only: an array argument would
    cost reference count updates on every call."""
    if d >= NE:
        return -1
    if nep == 0:
        return d // EPL
    if d >= e0 and d < e0 + nep:
        return d - e0
    return _uplink(d, info, nep, SPINES, ROUTING)


def _uplink(key, info, nep, SPINES, ROUTING):
    """The uplink port of a leaf for a flit leaving it: ``key`` (the destination endpoint
    of a unicast flit, the group of a multicast one) mod ``SPINES`` (deterministic), the
    ECMP hash of (source, ``key``), or -2 (adaptive: the caller picks)."""
    if ROUTING == 0:
        return nep + key % SPINES
    if ROUTING == 1:
        src = (info >> SRC_SHIFT) & SRC_MASK
        return nep + ecmp_hash(src, key) % SPINES
    return -2


def ecmp_hash(src, dest):
    """ECMP hash of a flow: the splitmix64 finalizer of ``src * 2**32 + dest``."""
    z = np.uint64(src) * np.uint64(4294967296) + np.uint64(dest)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.int64(z >> np.uint64(33))


def _voq_send(b, i, s_send, in_window, N, CAP, SV, DMASK, state):
    """Admission ``voq``, step 2: source ``i`` (which holds a link credit, a link slot and
    no framing slot) puts its next flit on the link, if any. Not inside a packet, it picks,
    round robin from ``sv_ptr``, the first destination ``d`` whose queue is non-empty and
    whose credits ``sc[i, d]`` cover the head packet (``min(size, CAP)`` flits, so a packet
    of at most ``CAP`` flits never waits for a credit once started), and moves the pointer
    one past ``d``. The packet's flits then go back to back (one per slot), each taking a
    credit of ``d``."""
    ONE = np.uint64(1)
    ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
    d = state.sv_cur[b, i]
    if d < 0:
        W = state.sv_ne.shape[2]
        g0 = state.sv_ptr[b, i]
        w0 = g0 >> 6
        for k in range(W + 1):
            w = w0 + k
            if w >= W:
                w -= W
            x = state.sv_ne[b, i, w]
            if k == 0:
                x &= ALL << np.uint64(g0 & 63)
            elif k == W:
                x &= ~(ALL << np.uint64(g0 & 63))     # the first word, below the pointer
            while x != 0:
                low = x & (~x + ONE)
                x ^= low
                dd = w * 64 + _DB_TABLE[(low * _DB) >> np.uint64(58)]
                need = min(state.sv_size[b, i, dd, state.sv_head[b, i, dd]], CAP)
                if state.sc[b, i, dd] >= need:
                    d = dd
                    break
            if d >= 0:
                break
        if d < 0:
            return
        state.sv_cur[b, i] = d
        state.sv_ptr[b, i] = d + 1 if d + 1 < N else 0
    if state.sc[b, i, d] <= 0:          # a packet longer than CAP, waiting for a credit
        return
    h = state.sv_head[b, i, d]
    fl = state.sv_flit[b, i]
    sz = state.sv_size[b, i, d, h]
    first = 1 if fl == 0 else 0
    last = 1 if fl == sz - 1 else 0
    info = ((state.sv_seq[b, i, d, h] & 0xFFFFFFFF) | ((fl & 0xFFF) << 32)
            | (first << 44) | (last << 45) | ((d & DMASK) << 48))
    state.lp_valid[b, i, s_send] = True
    state.lp_gen[b, i, s_send] = state.sv_gen[b, i, d, h]
    state.lp_info[b, i, s_send] = info
    state.tcred[b, i] -= 1
    state.sc[b, i, d] -= 1
    if in_window:
        state.st[b, i, 15] += 1
    if last == 1:
        state.sv_flit[b, i] = 0
        state.sv_cur[b, i] = -1
        state.sv_head[b, i, d] = h + 1 if h + 1 < SV else 0
        state.sv_cnt[b, i, d] -= 1
        if state.sv_cnt[b, i, d] == 0:
            state.sv_ne[b, i, d >> 6] &= ~(ONE << np.uint64(d & 63))
    else:
        state.sv_flit[b, i] = fl + 1


def _cycles(pt, boff, nsw, p, groups, traffic, state, log, net):
    """Cycles ``T0 .. T0 + C - 1`` of ``nsw`` switches, state indices ``boff ..
    boff + nsw - 1``, traffic batch row ``pt``; in every cycle the switches one after the
    other (switch-to-switch links have a latency of at least one cycle, so a switch reads
    nothing another switch wrote in the same cycle and their order does not matter).

    Switch ``s`` (``net``, :class:`Net`) has ``nports[s]`` ports and runs ``iters[s]``
    iSLIP rounds. Its ports ``0 .. nep[s]-1`` face endpoints (source queue and link of
    ``[link]``; their traffic and ready columns are ``e0[s] ..``); ports ``nep[s] ..``
    (Clos only) are switch-to-switch links of latency ``L2`` and ``K2`` credits: output
    ``o`` feeds input ``peer_p[s, o]`` of switch ``boff + peer_s[s, o]``. A single switch
    is one switch with ``e0 = 0, nep = nports = N``: every port faces an endpoint.

    The arrays of every tuple are bound to local names once per call: an array taken from
    a tuple, or passed to a function, costs an atomic reference count update each time."""

    FIFO = p[1]
    CAP = p[2]
    OUT_DEPTH = p[4]
    L = p[5]
    FRAME = p[6]
    K = p[7]
    SQ = p[8]
    H = p[9]
    W0 = p[10]
    W1 = p[11]
    LOG = p[12]
    T0 = p[13]
    USE_READY = p[15]
    G = p[16]
    DMASK = 0xFFFF if p[18] else 0xFF
    TOPO = p[19]
    ROUTING = p[20]
    EPL = p[21]
    SPINES = p[22]
    NE = p[23]
    L2 = p[24]
    K2 = p[25]
    ADM = p[27]
    SV = p[28]
    LP = L + 1           # flit delay line slots
    CR = L + 2           # link credit return ring
    ER = 2 * L + 2       # egress credit return ring
    LP2 = L2 + 1         # the same for switch-to-switch links
    CR2 = L2 + 2

    ONE = np.uint64(1)
    ALL = np.uint64(0xFFFFFFFFFFFFFFFF)

    (q_gen, q_info, q_head, q_cnt, ne, done, hdone, ob_gen, ob_info, ob_src, ob_head, ob_cnt,
     credit, lock, gptr, aptr, sq_dest, sq_size, sq_kind, sq_gen, sq_seq, sq_head, sq_cnt,
     sq_flit, seq_next, sv_size, sv_gen, sv_seq, sv_head, sv_cnt, sv_ne, sv_ptr, sv_cur,
     sv_flit, sc, sc_ret, lp_valid, lp_gen, lp_info, tcred, cr_ret, rx_gen, rx_info, rx_head,
     rx_cnt, ecred, ecr_ret, st, hist, latmax) = state
    g_members, g_gvalid, g_slots = groups
    tr_gdest, tr_gsize, tr_gkind, tr_ready = traffic
    lg_t, lg_o, lg_src, lg_info, lg_b, lg_n = log
    nports, neps, e0s, iters, peer_s, peer_p, occ, hold, _active = net
    logcap = lg_t.shape[0]
    W = ne.shape[2]
    C = p[14]
    NMAX = credit.shape[1]
    # scratch, per call (so that batch points may run in parallel threads)
    matched_in = np.empty(NMAX, np.int64)
    matched_out = np.empty(NMAX, np.int64)
    grant = np.empty(NMAX, np.int64)
    best = np.empty(NMAX, np.int64)
    bestd = np.empty(NMAX, np.int64)
    popped = np.empty(NMAX, np.int64)
    cred_inc = np.empty(NMAX, np.int64)
    head_dest = np.empty(NMAX, np.int64)
    head_kind = np.empty(NMAX, np.int64)
    rb = np.zeros((NMAX, W), np.uint64)    # FIFO mode: requests of the heads, per output
    freeb = np.empty(W, np.uint64)         # inputs not matched yet
    for c in range(C):
        t = T0 + c
        in_window = (t >= W0) and (t < W1)
        framing = FRAME > 0 and (t % FRAME) == FRAME - 1
        r_slot = t % g_slots.shape[1]

        for sw in range(nsw):
            b = boff + sw
            e0 = e0s[sw]
            nep = neps[sw]
            N = nports[sw]
            ITERS = iters[sw]
            gb = sw * G                 # this switch's rows of the group table
            # ---- 1. traffic --------------------------------------------------------
            for i in range(nep):
                sz = tr_gsize[pt, c, e0 + i]
                if sz <= 0:
                    continue
                d = tr_gdest[pt, c, e0 + i]
                kd = tr_gkind[pt, c, e0 + i]
                copies = 1
                if kd == 1:
                    copies = 0
                    if d < G and g_gvalid[d]:
                        if TOPO:                # the group's endpoints on every leaf
                            for lf in range(nsw - SPINES):
                                for o in range(EPL):
                                    if g_members[lf * G + d, o]:
                                        copies += 1
                        else:
                            for o in range(N):
                                if g_members[d, o]:
                                    copies += 1
                if in_window:
                    st[b, i, 7] += sz
                    st[b, i, 8] += 1
                    st[b, i, 14] += copies
                if ADM:                     # the source's queue for destination d (unicast)
                    n_d = sv_cnt[b, i, d]
                    if n_d >= SV:
                        st[b, i, 10] += 1
                        st[b, i, 11] += sz
                        continue
                    slot = sv_head[b, i, d] + n_d
                    if slot >= SV:
                        slot -= SV
                    sv_size[b, i, d, slot] = sz
                    sv_gen[b, i, d, slot] = t
                    sv_seq[b, i, d, slot] = seq_next[b, i]
                    seq_next[b, i] += 1
                    if n_d == 0:
                        sv_ne[b, i, d >> 6] |= ONE << np.uint64(d & 63)
                    sv_cnt[b, i, d] = n_d + 1
                    continue
                if sq_cnt[b, i] >= SQ:
                    st[b, i, 10] += 1
                    st[b, i, 11] += sz
                    continue
                slot = sq_head[b, i] + sq_cnt[b, i]
                if slot >= SQ:
                    slot -= SQ
                sq_dest[b, i, slot] = d
                sq_size[b, i, slot] = sz
                sq_kind[b, i, slot] = kd
                sq_gen[b, i, slot] = t
                sq_seq[b, i, slot] = seq_next[b, i]
                seq_next[b, i] += 1
                sq_cnt[b, i] += 1

            # ---- 2. link, sender side ----------------------------------------------
            r_cr = t % CR
            s_send = (t + L) % LP
            s_arr = t % LP
            r_er = t % ER
            r_er_ret = (t + 2 * L + 1) % ER
            r_cr_ret = (t + L + 1) % CR
            r_cr_ret2 = (t + L2 + 1) % CR2
            for i in range(nep):
                r = r_cr
                tcred[b, i] += cr_ret[b, i, r]
                cr_ret[b, i, r] = 0
                if ADM:
                    dr = sc_ret[b, i, r]
                    if dr >= 0:
                        sc[b, i, dr] += 1
                        sc_ret[b, i, r] = -1
                    if tcred[b, i] > 0 and not framing and g_slots[e0 + i, r_slot]:
                        _voq_send(b, i, s_send, in_window, N, CAP, SV, DMASK, state)
                elif (sq_cnt[b, i] > 0 and tcred[b, i] > 0 and not framing
                        and g_slots[e0 + i, r_slot]):
                    h = sq_head[b, i]
                    fl = sq_flit[b, i]
                    sz = sq_size[b, i, h]
                    first = 1 if fl == 0 else 0
                    last = 1 if fl == sz - 1 else 0
                    info = ((sq_seq[b, i, h] & 0xFFFFFFFF) | ((fl & 0xFFF) << 32)
                            | (first << 44) | (last << 45)
                            | ((sq_kind[b, i, h] & 3) << 46)
                            | ((sq_dest[b, i, h] & DMASK) << 48))
                    s = s_send
                    lp_valid[b, i, s] = True
                    lp_gen[b, i, s] = sq_gen[b, i, h]
                    lp_info[b, i, s] = info
                    tcred[b, i] -= 1
                    if in_window:
                        st[b, i, 15] += 1
                    if last == 1:
                        sq_flit[b, i] = 0
                        sq_head[b, i] = h + 1 if h + 1 < SQ else 0
                        sq_cnt[b, i] -= 1
                    else:
                        sq_flit[b, i] = fl + 1
                s = s_arr
                if lp_valid[b, i, s]:
                    lp_valid[b, i, s] = False
                    w = rx_head[b, i] + rx_cnt[b, i]
                    if w >= K:
                        w -= K
                    rx_gen[b, i, w] = lp_gen[b, i, s]
                    rx_info[b, i, w] = lp_info[b, i, s]
                    rx_cnt[b, i] += 1
            # network inputs (Clos): flits put on the link by the upstream switch's output stage
            s_arr2 = t % LP2
            for i in range(nep, N):
                s = s_arr2
                if lp_valid[b, i, s]:
                    lp_valid[b, i, s] = False
                    w = rx_head[b, i] + rx_cnt[b, i]
                    if w >= K2:
                        w -= K2
                    rx_gen[b, i, w] = lp_gen[b, i, s]
                    rx_info[b, i, w] = lp_info[b, i, s]
                    rx_cnt[b, i] += 1

            # ---- 3. output stage ---------------------------------------------------
            for o in range(nep):
                cred_inc[o] = 0
                r = r_er
                ecred[b, o] += ecr_ret[b, o, r]
                ecr_ret[b, o, r] = 0
                if ob_cnt[b, o] == 0:
                    continue
                rdy = ecred[b, o] > 0 and not framing and g_slots[e0 + o, r_slot]
                if USE_READY and not tr_ready[pt, c, e0 + o]:
                    rdy = False
                if not rdy:
                    st[b, o, 3] += 1
                    continue
                h = ob_head[b, o]
                gen = ob_gen[b, o, h]
                info = ob_info[b, o, h]
                src = ob_src[b, o, h]
                ob_head[b, o] = h + 1 if h + 1 < OUT_DEPTH else 0
                ob_cnt[b, o] -= 1
                cred_inc[o] = 1
                st[b, o, 1] += 1
                ecred[b, o] -= 1
                ecr_ret[b, o, r_er_ret] += 1
                if TOPO:
                    occ[b, o] -= 1
                td = t + L
                if td >= W0 and td < W1:
                    st[b, o, 9] += 1
                if (info >> 45) & 1 and gen >= W0 and gen < W1:
                    lat = td - gen
                    st[b, o, 12] += lat
                    st[b, o, 13] += 1
                    hist[b, min(lat, H - 1)] += 1
                    if lat > latmax[b]:
                        latmax[b] = lat
                if LOG:
                    k = lg_n[0]
                    if k < logcap:
                        lg_t[k] = t
                        lg_o[k] = o
                        lg_src[k] = src
                        lg_info[k] = info
                        lg_b[k] = b
                    lg_n[0] = k + 1
            # network outputs (Clos): the downstream input's link credits; the flit onto
            # its delay line
            r_cr2 = t % CR2
            s_send2 = (t + L2) % LP2
            for o in range(nep, N):
                cred_inc[o] = 0
                pb = boff + peer_s[sw, o]
                pp = peer_p[sw, o]
                tcred[pb, pp] += cr_ret[pb, pp, r_cr2]
                cr_ret[pb, pp, r_cr2] = 0
                if ob_cnt[b, o] == 0:
                    continue
                if tcred[pb, pp] <= 0 or framing:
                    st[b, o, 3] += 1
                    continue
                h = ob_head[b, o]
                gen = ob_gen[b, o, h]
                info = ob_info[b, o, h]
                src = ob_src[b, o, h]
                ob_head[b, o] = h + 1 if h + 1 < OUT_DEPTH else 0
                ob_cnt[b, o] -= 1
                cred_inc[o] = 1
                st[b, o, 1] += 1
                occ[b, o] -= 1
                tcred[pb, pp] -= 1
                lp_valid[pb, pp, s_send2] = True
                lp_gen[pb, pp, s_send2] = gen
                lp_info[pb, pp, s_send2] = info
                if LOG:
                    k = lg_n[0]
                    if k < logcap:
                        lg_t[k] = t
                        lg_o[k] = o
                        lg_src[k] = src
                        lg_info[k] = info
                        lg_b[k] = b
                    lg_n[0] = k + 1

            # ---- 4. allocator --------------------------------------------------------
            for i in range(N):
                matched_in[i] = -1
                popped[i] = -1
            for o in range(N):
                matched_out[o] = -1
            for w in range(W):
                freeb[w] = ALL
            if FIFO:
                for o in range(N):
                    for w in range(W):
                        rb[o, w] = 0
                for i in range(N):
                    head_dest[i] = -1
                    if q_cnt[b, i, 0] > 0:
                        info = q_info[b, i, 0, q_head[b, i, 0]]
                        head_kind[i] = (info >> 46) & 3
                        head_dest[i] = (info >> 48) & 0xFF
                        bit = ONE << np.uint64(i & 63)
                        if head_kind[i] == 0:
                            rb[head_dest[i], i >> 6] |= bit
                        else:
                            for o in range(N):
                                if g_members[head_dest[i], o] and not hdone[b, i, o]:
                                    rb[o, i >> 6] |= bit
            for rnd in range(ITERS):
                any_grant = False
                for o in range(N):
                    grant[o] = -1
                    if matched_out[o] >= 0 or credit[b, o] <= 0:
                        continue
                    lk = lock[b, o]
                    if lk >= 0:
                        word = rb[o, lk >> 6] if FIFO else ne[b, o, lk >> 6]
                        if (word >> np.uint64(lk & 63)) & ONE and matched_in[lk] < 0:
                            grant[o] = lk
                            any_grant = True
                        continue
                    g0 = gptr[b, o]
                    w0 = g0 >> 6
                    sel = -1
                    for k in range(W + 1):
                        w = w0 + k
                        if w >= W:
                            w -= W
                        x = (rb[o, w] if FIFO else ne[b, o, w]) & freeb[w]
                        if k == 0:
                            x &= ALL << np.uint64(g0 & 63)
                        if x != 0:
                            low = x & (~x + ONE)
                            sel = w * 64 + _DB_TABLE[(low * _DB) >> np.uint64(58)]
                            break
                    if sel >= 0:
                        grant[o] = sel
                        any_grant = True
                if not any_grant:
                    break
                for i in range(N):
                    best[i] = -1
                    bestd[i] = N
                for o in range(N):
                    i = grant[o]
                    if i >= 0:
                        d = o - aptr[b, i]
                        if d < 0:
                            d += N
                        if d < bestd[i]:
                            bestd[i] = d
                            best[i] = o
                for i in range(N):
                    o = best[i]
                    if o >= 0:
                        matched_in[i] = o
                        matched_out[o] = i
                        freeb[i >> 6] &= ~(ONE << np.uint64(i & 63))
                        if rnd == 0:
                            aptr[b, i] = o + 1 if o + 1 < N else 0
                            gptr[b, o] = i + 1 if i + 1 < N else 0
            # transfers
            for i in range(N):
                o = matched_in[i]
                if o < 0:
                    continue
                q = 0 if FIFO else o
                h = q_head[b, i, q]
                gen = q_gen[b, i, q, h]
                info = q_info[b, i, q, h]
                w = ob_head[b, o] + ob_cnt[b, o]
                if w >= OUT_DEPTH:
                    w -= OUT_DEPTH
                ob_gen[b, o, w] = gen
                ob_info[b, o, w] = info
                ob_src[b, o, w] = i
                ob_cnt[b, o] += 1
                credit[b, o] -= 1
                if ((info >> 46) & 3) == 0:
                    lock[b, o] = -1 if (info >> 45) & 1 else i
                pop = True
                if FIFO:
                    hd = head_dest[i]
                    if head_kind[i] != 0:
                        hdone[b, i, o] = True
                        for o2 in range(N):
                            if g_members[hd, o2] and not hdone[b, i, o2]:
                                pop = False
                                break
                        if pop:
                            for o2 in range(N):
                                hdone[b, i, o2] = False
                if pop:
                    q_head[b, i, q] = h + 1 if h + 1 < CAP else 0
                    q_cnt[b, i, q] -= 1
                    popped[i] = q
                    if not FIFO and q_cnt[b, i, q] == 0:
                        ne[b, o, i >> 6] &= ~(ONE << np.uint64(i & 63))
                    if ADM and i < nep:         # one credit for destination o back to source i
                        sc_ret[b, i, r_cr_ret] = o

            # ---- 5. ingress ------------------------------------------------------------
            for i in range(N):
                if rx_cnt[b, i] == 0:
                    continue
                h = rx_head[b, i]
                info = rx_info[b, i, h]
                kd = (info >> 46) & 3
                d = (info >> 48) & DMASK
                rdy = False
                tgt = d
                lastcopy = True
                if TOPO and kd == 0:
                    tgt = _route(d, info, e0, nep, NE, EPL, SPINES, ROUTING)
                elif TOPO and kd == 1:
                    # Clos multicast: this switch's row of the group, lowest port first; a
                    # spine never sends back to the flit's own leaf (its input i); a leaf
                    # adds one copy up the routed uplink, last, for a flit from an endpoint
                    # when members are on other leaves; no target here: dropped
                    tgt = -1
                    if d < G and g_gvalid[d]:
                        lim = nep if nep > 0 else N
                        for o in range(lim):
                            if (g_members[gb + d, o] and not done[b, i, o]
                                    and (nep > 0 or o != i)):
                                if tgt < 0:
                                    tgt = o
                                else:
                                    lastcopy = False
                                    break
                        if nep > 0 and i < nep and g_members[gb + d, nep]:
                            if tgt >= 0:
                                lastcopy = False
                            else:
                                tgt = _uplink(d, info, nep, SPINES, ROUTING)
                if tgt == -2:                       # adaptive: least occupied uplink
                    if (info >> 44) & 1:
                        s0 = ecmp_hash((info >> SRC_SHIFT) & SRC_MASK, d) % SPINES
                        k = nep + s0
                        for j in range(1, SPINES):
                            o = nep + (s0 + j) % SPINES
                            if occ[b, o] < occ[b, k]:
                                k = o
                        hold[b, i] = k
                    tgt = hold[b, i]
                if kd == 0:
                    bad = tgt < 0 if TOPO else d >= N
                    if bad:
                        st[b, i, 4] += 1
                        rdy = True
                        drop = True
                    else:
                        drop = False
                elif kd == 1:
                    if TOPO:
                        drop = tgt < 0
                    else:
                        drop = True
                        if d < G and g_gvalid[d]:
                            for o in range(N):
                                if g_members[d, o]:
                                    drop = False
                                    break
                    if drop:
                        st[b, i, 5] += 1
                        rdy = True
                else:
                    st[b, i, 6] += 1
                    rdy = True
                    drop = True
                if not drop:
                    if FIFO:
                        cnt0 = q_cnt[b, i, 0] + (1 if popped[i] == 0 else 0)
                        if cnt0 < CAP:
                            w = q_head[b, i, 0] + q_cnt[b, i, 0]
                            if w >= CAP:
                                w -= CAP
                            q_gen[b, i, 0, w] = rx_gen[b, i, h]
                            q_info[b, i, 0, w] = info
                            q_cnt[b, i, 0] += 1
                            rdy = True
                    else:
                        if kd == 0 or TOPO:
                            target = tgt
                        else:
                            target = -1
                            for o in range(N):
                                if g_members[d, o] and not done[b, i, o]:
                                    if target < 0:
                                        target = o
                                    else:
                                        lastcopy = False
                                        break
                        cnt0 = q_cnt[b, i, target] + (1 if popped[i] == target else 0)
                        if cnt0 < CAP:
                            w = q_head[b, i, target] + q_cnt[b, i, target]
                            if w >= CAP:
                                w -= CAP
                            q_gen[b, i, target, w] = rx_gen[b, i, h]
                            q_info[b, i, target, w] = info
                            if q_cnt[b, i, target] == 0:
                                ne[b, target, i >> 6] |= ONE << np.uint64(i & 63)
                            q_cnt[b, i, target] += 1
                            if TOPO:
                                occ[b, target] += 1
                            if lastcopy:
                                rdy = True
                                if kd != 0:
                                    for o in range(N):
                                        done[b, i, o] = False
                            else:
                                done[b, i, target] = True
                    if rdy:
                        st[b, i, 0] += 1
                if rdy:
                    if i < nep:
                        rx_head[b, i] = h + 1 if h + 1 < K else 0
                        cr_ret[b, i, r_cr_ret] += 1
                    else:
                        rx_head[b, i] = h + 1 if h + 1 < K2 else 0
                        cr_ret[b, i, r_cr_ret2] += 1
                    rx_cnt[b, i] -= 1
                else:
                    st[b, i, 2] += 1

            # ---- 6. credits ------------------------------------------------------------
            for o in range(N):
                credit[b, o] += cred_inc[o]


    return 0


def _point(b, p, groups, traffic, state, log):
    """Cycles ``T0 .. T0 + C - 1`` of batch point ``b`` (one switch, every port an
    endpoint)."""
    N = p[0]
    one = np.ones(1, np.int64)
    net = Net(one * N, one * N, one * 0, one * p[3], np.zeros((1, 1), np.int64),
              np.zeros((1, 1), np.int64), np.zeros((1, 1), np.int64),
              np.zeros((1, 1), np.int64), np.ones(1, np.bool_))
    return _cycles(b, b, 1, p, groups, traffic, state, log, net)


def _clos_point(pt, p, groups, traffic, state, log, net):
    """Cycles ``T0 .. T0 + C - 1`` of Clos batch point ``pt``: its ``NSW`` switches (state
    indices ``pt * NSW + s``)."""
    NSW = p[26]
    return _cycles(pt, pt * NSW, NSW, p, groups, traffic, state, log, net)


def _kernel(p, groups, traffic, state, log):
    """All batch points, one after the other."""
    for b in range(traffic.gdest.shape[0]):
        _point(b, p, groups, traffic, state, log)
    return 0


def _kernel_threads(p, groups, traffic, state, log):
    """All batch points on numba threads (``prange``); only without the departure log,
    whose counter is shared."""
    for b in numba.prange(traffic.gdest.shape[0]):
        _point(b, p, groups, traffic, state, log)
    return 0


def _clos_kernel(p, groups, traffic, state, log, net):
    for pt in range(traffic.gdest.shape[0]):
        if net.active[pt]:
            _clos_point(pt, p, groups, traffic, state, log, net)
    return 0


def _clos_kernel_threads(p, groups, traffic, state, log, net):
    """Points handed to threads one at a time (chunk size 1), the last point first (in a
    sweep the highest load, the longest to simulate)."""
    B = traffic.gdest.shape[0]
    for k in numba.prange(B):
        pt = B - 1 - k
        if net.active[pt]:
            _clos_point(pt, p, groups, traffic, state, log, net)
    return 0


#: The crosspoint-buffered switch's own registers (``switch.mode = "crosspoint"``,
#: :func:`run_xp_chunk`), leading axis batch, per input ``i``: the input register
#: ``p_valid``/``p_gen``/``p_info``; the input stage's two entries ``e_valid``, ``e_gen``,
#: ``e_info``, ``e_target[b, i, k, o]`` and ``e_drops`` (bit 0 dest, 1 group, 2 kind), the
#: head entry ``hsel``, the ``ready`` and ``fill`` registers; the late counters ``took``,
#: ``took_drops``, ``stalled``. Per crosspoint ``(i, o)``: the row's free-slot counter
#: ``lag`` and ``notfull`` register, its write register ``owe`` and the registered credit
#: return ``back``; the crosspoint's pop register ``xpop``; output o's view: the write bit
#: ``swe`` and the count ``cnt``. Per output ``o``: ``sel`` (the crosspoint popped now, -1:
#: none), the round-robin pointer ``ptr``, the lock ``lock_v``/``lock_k``, the credit
#: registers ``c1`` (>= 1), ``c2`` (>= 2), ``clag``, ``charged``, ``returned``; the flits
#: between the pop and the output-buffer write, ``pipe_*[b, o, t % 4]``. The crosspoint
#: buffers themselves are the VOQ arrays ``q_*`` of :class:`State` (queue (i, o)).
XState = namedtuple("XState", (
    "p_valid", "p_gen", "p_info", "e_valid", "e_gen", "e_info", "e_target", "e_drops",
    "hsel", "ready", "fill", "took", "took_drops", "stalled",
    "lag", "notfull", "owe", "back", "xpop", "swe", "cnt",
    "sel", "ptr", "lock_v", "lock_k", "c1", "c2", "clag", "charged", "returned",
    "pipe_v", "pipe_gen", "pipe_info", "pipe_src"))


def _xp_point(b, p, groups, traffic, state, xs, log):
    """Cycles ``T0 .. T0 + C - 1`` of batch point ``b``: one crosspoint-buffered switch
    (rtl/switch/crosspoint_switch.py) with its links, register for register. Source
    queues, links and the output stage as in :func:`_cycles`; every decision reads the
    registers at the start of the cycle, every write takes effect in the next."""
    N = p[0]
    CAP = p[2]
    OUT_DEPTH = p[4]
    L = p[5]
    FRAME = p[6]
    K = p[7]
    SQ = p[8]
    H = p[9]
    W0 = p[10]
    W1 = p[11]
    LOG = p[12]
    T0 = p[13]
    C = p[14]
    USE_READY = p[15]
    G = p[16]
    LP = L + 1
    CR = L + 2
    ER = 2 * L + 2

    (q_gen, q_info, q_head, q_cnt, _ne, _done, _hdone, ob_gen, ob_info, ob_src, ob_head,
     ob_cnt, credit, lock, _gptr, _aptr, sq_dest, sq_size, sq_kind, sq_gen, sq_seq, sq_head,
     sq_cnt, sq_flit, seq_next, _svs, _svg, _svq, _svh, _svc, _svn, _svp, _svu, _svf, _sc,
     _scr, lp_valid, lp_gen, lp_info, tcred, cr_ret, rx_gen, rx_info, rx_head, rx_cnt,
     ecred, ecr_ret, st, hist, latmax) = state
    (p_valid, p_gen, p_info, e_valid, e_gen, e_info, e_target, e_drops, hsel, ready, fill,
     took, took_drops, stalled, lag, notfull, owe, back, xpop, swe, cnt, sel, ptr, lock_v,
     lock_k, c1, c2, clag, charged, returned, pipe_v, pipe_gen, pipe_info, pipe_src) = xs
    g_members, g_gvalid, g_slots = groups
    tr_gdest, tr_gsize, tr_gkind, tr_ready = traffic
    lg_t, lg_o, lg_src, lg_info, lg_b, lg_n = log
    logcap = lg_t.shape[0]
    hs = np.zeros(N, np.bool_)          # output handshakes of this cycle
    iwe = np.zeros((N, N), np.bool_)    # the rows' writes of this cycle (i_we)
    sel0 = np.empty(N, np.int64)        # sel at the start of the cycle
    for c in range(C):
        t = T0 + c
        in_window = (t >= W0) and (t < W1)
        framing = FRAME > 0 and (t % FRAME) == FRAME - 1
        r_slot = t % g_slots.shape[1]

        # ---- 1. traffic ------------------------------------------------------------
        for i in range(N):
            sz = tr_gsize[b, c, i]
            if sz <= 0:
                continue
            d = tr_gdest[b, c, i]
            kd = tr_gkind[b, c, i]
            copies = 1
            if kd == 1:
                copies = 0
                if d < G and g_gvalid[d]:
                    for o in range(N):
                        if g_members[d, o]:
                            copies += 1
            if in_window:
                st[b, i, 7] += sz
                st[b, i, 8] += 1
                st[b, i, 14] += copies
            if sq_cnt[b, i] >= SQ:
                st[b, i, 10] += 1
                st[b, i, 11] += sz
                continue
            slot = sq_head[b, i] + sq_cnt[b, i]
            if slot >= SQ:
                slot -= SQ
            sq_dest[b, i, slot] = d
            sq_size[b, i, slot] = sz
            sq_kind[b, i, slot] = kd
            sq_gen[b, i, slot] = t
            sq_seq[b, i, slot] = seq_next[b, i]
            seq_next[b, i] += 1
            sq_cnt[b, i] += 1

        # ---- 2. link, sender side --------------------------------------------------
        r_cr = t % CR
        s_send = (t + L) % LP
        s_arr = t % LP
        r_er = t % ER
        r_er_ret = (t + 2 * L + 1) % ER
        r_cr_ret = (t + L + 1) % CR
        for i in range(N):
            tcred[b, i] += cr_ret[b, i, r_cr]
            cr_ret[b, i, r_cr] = 0
            if (sq_cnt[b, i] > 0 and tcred[b, i] > 0 and not framing
                    and g_slots[i, r_slot]):
                h = sq_head[b, i]
                fl = sq_flit[b, i]
                sz = sq_size[b, i, h]
                first = 1 if fl == 0 else 0
                last = 1 if fl == sz - 1 else 0
                info = ((sq_seq[b, i, h] & 0xFFFFFFFF) | ((fl & 0xFFF) << 32)
                        | (first << 44) | (last << 45) | ((sq_kind[b, i, h] & 3) << 46)
                        | ((sq_dest[b, i, h] & 0xFF) << 48))
                lp_valid[b, i, s_send] = True
                lp_gen[b, i, s_send] = sq_gen[b, i, h]
                lp_info[b, i, s_send] = info
                tcred[b, i] -= 1
                if in_window:
                    st[b, i, 15] += 1
                if last == 1:
                    sq_flit[b, i] = 0
                    sq_head[b, i] = h + 1 if h + 1 < SQ else 0
                    sq_cnt[b, i] -= 1
                else:
                    sq_flit[b, i] = fl + 1
            if lp_valid[b, i, s_arr]:
                lp_valid[b, i, s_arr] = False
                w = rx_head[b, i] + rx_cnt[b, i]
                if w >= K:
                    w -= K
                rx_gen[b, i, w] = lp_gen[b, i, s_arr]
                rx_info[b, i, w] = lp_info[b, i, s_arr]
                rx_cnt[b, i] += 1

        # ---- 3. output stage (the output buffer's head, o_port) ---------------------
        for o in range(N):
            hs[o] = False
            ecred[b, o] += ecr_ret[b, o, r_er]
            ecr_ret[b, o, r_er] = 0
            if ob_cnt[b, o] == 0:
                continue
            rdy = ecred[b, o] > 0 and not framing and g_slots[o, r_slot]
            if USE_READY and not tr_ready[b, c, o]:
                rdy = False
            if not rdy:
                st[b, o, 3] += 1
                continue
            h = ob_head[b, o]
            gen = ob_gen[b, o, h]
            info = ob_info[b, o, h]
            src = ob_src[b, o, h]
            ob_head[b, o] = h + 1 if h + 1 < OUT_DEPTH else 0
            ob_cnt[b, o] -= 1
            hs[o] = True
            st[b, o, 1] += 1
            ecred[b, o] -= 1
            ecr_ret[b, o, r_er_ret] += 1
            td = t + L
            if td >= W0 and td < W1:
                st[b, o, 9] += 1
            if (info >> 45) & 1 and gen >= W0 and gen < W1:
                lat = td - gen
                st[b, o, 12] += lat
                st[b, o, 13] += 1
                hist[b, min(lat, H - 1)] += 1
                if lat > latmax[b]:
                    latmax[b] = lat
            if LOG:
                k = lg_n[0]
                if k < logcap:
                    lg_t[k] = t
                    lg_o[k] = o
                    lg_src[k] = src
                    lg_info[k] = info
                    lg_b[k] = b
                lg_n[0] = k + 1

        # ---- 4. output arbiters (each reads only its own registers) -----------------
        for o in range(N):
            s = sel[b, o]
            sel0[o] = s
            sel_any = s >= 0
            opens = False
            closes = False
            if sel_any:
                info = q_info[b, s, o, q_head[b, s, o]]      # the front flit, leaving now
                if ((info >> 46) & 3) == 0:
                    if (info >> 45) & 1:
                        closes = True
                    else:
                        opens = True
            cok = c2[b, o] or (c1[b, o] and not sel_any)
            # round robin over "count >= 1" from ptr, masked at sel without a 2nd flit
            rr = -1
            pt0 = ptr[b, o]
            for k in range(N):
                j = pt0 + k
                if j >= N:
                    j -= N
                if cnt[b, j, o] >= 1:
                    rr = j
                    break
            if rr >= 0 and rr == s and cnt[b, s, o] < 2:
                rr = -1
            any_avail = False
            for j in range(N):
                if cnt[b, j, o] >= 2 or (cnt[b, j, o] >= 1 and j != s):
                    any_avail = True
                    break
            if opens:
                nxt = s if cnt[b, s, o] >= 2 else -1
            elif closes or not lock_v[b, o]:
                nxt = rr
            else:
                lk = lock_k[b, o]
                nxt = -1
                if lk >= 0 and (cnt[b, lk, o] >= 2 or (cnt[b, lk, o] >= 1 and lk != s)):
                    nxt = lk
            if cok and not opens and (closes or not lock_v[b, o]) and any_avail:
                ptr[b, o] = rr + 1 if (rr >= 0 and rr + 1 < N) else 0
            lock_v[b, o] = opens or (lock_v[b, o] and not closes)
            if opens or closes:
                lock_k[b, o] = s
            sel[b, o] = nxt if cok else -1
            # credits: c1/c2 leave out this cycle's return (it counts a cycle later)
            cur = clag[b, o] - (1 if charged[b, o] else 0) + (1 if returned[b, o] else 0)
            c1[b, o] = cur - (1 if sel_any else 0) >= 1
            c2[b, o] = cur - (1 if sel_any else 0) >= 2
            clag[b, o] = cur
            charged[b, o] = sel_any
            returned[b, o] = hs[o]
            credit[b, o] = cur - (1 if sel_any else 0) + (1 if hs[o] else 0)
            # the pop: the front flit reaches the output buffer 3 cycles later
            if sel_any:
                h = q_head[b, s, o]
                r3 = (t + 3) % 4
                pipe_v[b, o, r3] = True
                pipe_gen[b, o, r3] = q_gen[b, s, o, h]
                pipe_info[b, o, r3] = q_info[b, s, o, h]
                pipe_src[b, o, r3] = s
                q_head[b, s, o] = h + 1 if h + 1 < CAP else 0
                q_cnt[b, s, o] -= 1

        # ---- 5. input stages: the head leaves (dropped, or written into every
        # crosspoint of its target mask at once) ------------------------------------
        for i in range(N):
            hsl = hsel[b, i]
            for o in range(N):
                iwe[i, o] = False
            take = False
            if e_valid[b, i, hsl]:
                if e_drops[b, i, hsl] != 0:
                    take = True
                else:
                    take = True
                    for o in range(N):
                        if e_target[b, i, hsl, o] and not notfull[b, i, o]:
                            take = False
                            break
                    if take:
                        for o in range(N):
                            if e_target[b, i, hsl, o]:
                                iwe[i, o] = True
                                w = q_head[b, i, o] + q_cnt[b, i, o]
                                if w >= CAP:
                                    w -= CAP
                                q_gen[b, i, o, w] = e_gen[b, i, hsl]
                                q_info[b, i, o, w] = e_info[b, i, hsl]
                                q_cnt[b, i, o] += 1
            # the late counters: last cycle's take and stall count now
            if took[b, i]:
                dr = took_drops[b, i]
                if dr == 0:
                    st[b, i, 0] += 1
                st[b, i, 4] += dr & 1
                st[b, i, 5] += (dr >> 1) & 1
                st[b, i, 6] += (dr >> 2) & 1
            if stalled[b, i]:
                st[b, i, 2] += 1
            took[b, i] = take
            took_drops[b, i] = e_drops[b, i, hsl]
            # the entries: the input register's flit goes into entry ``fill``
            enq = p_valid[b, i] and ready[b, i]
            fl = fill[b, i]
            v0 = e_valid[b, i, 0]
            v1 = e_valid[b, i, 1]
            if enq and fl == 0:
                v0 = True
            elif hsl == 0 and take:
                v0 = False
            if enq and fl == 1:
                v1 = True
            elif hsl == 1 and take:
                v1 = False
            hn = hsl ^ (1 if take else 0)
            if enq:
                info = p_info[b, i]
                e_gen[b, i, fl] = p_gen[b, i]
                e_info[b, i, fl] = info
                kd = (info >> 46) & 3
                d = (info >> 48) & 0xFF
                dr = 0
                for o in range(N):
                    e_target[b, i, fl, o] = False
                if kd == 0:
                    if d < N:
                        e_target[b, i, fl, d] = True
                    else:
                        dr = 1
                elif kd == 1:
                    dr = 2
                    if d < G and g_gvalid[d]:
                        for o in range(N):
                            if g_members[d, o]:
                                e_target[b, i, fl, o] = True
                                dr = 0
                else:
                    dr = 4
                e_drops[b, i, fl] = dr
            e_valid[b, i, 0] = v0
            e_valid[b, i, 1] = v1
            hsel[b, i] = hn
            vh = v1 if hn == 1 else v0
            fill[b, i] = (1 - hn) if vh else hn
            # the input register: the link's receive FIFO head is i_port[i]
            prdy = (not p_valid[b, i]) or ready[b, i]
            ready[b, i] = not (v0 and v1)
            pv = rx_cnt[b, i] > 0
            stalled[b, i] = pv and not prdy
            if prdy:
                p_valid[b, i] = pv
                if pv:
                    h = rx_head[b, i]
                    p_gen[b, i] = rx_gen[b, i, h]
                    p_info[b, i] = rx_info[b, i, h]
                    rx_head[b, i] = h + 1 if h + 1 < K else 0
                    rx_cnt[b, i] -= 1
                    cr_ret[b, i, r_cr_ret] += 1

        # ---- 6. registers between the rows, the crosspoints and the outputs ---------
        for i in range(N):
            for o in range(N):
                popn = sel0[o] == i
                cnt[b, i, o] += (1 if swe[b, i, o] else 0) - (1 if popn else 0)
                swe[b, i, o] = owe[b, i, o]
                lg = lag[b, i, o]
                ge2 = lg >= 3 if owe[b, i, o] else lg >= 2
                lag[b, i, o] = lg - (1 if owe[b, i, o] else 0) + (1 if back[b, i, o] else 0)
                notfull[b, i, o] = (back[b, i, o] or ge2
                                    or (notfull[b, i, o] and not iwe[i, o]))
                owe[b, i, o] = iwe[i, o]
                back[b, i, o] = xpop[b, i, o]
                xpop[b, i, o] = popn
        # the crossbar register writes the output buffer (popped 3 cycles ago)
        r0 = t % 4
        for o in range(N):
            if pipe_v[b, o, r0]:
                pipe_v[b, o, r0] = False
                w = ob_head[b, o] + ob_cnt[b, o]
                if w >= OUT_DEPTH:
                    w -= OUT_DEPTH
                ob_gen[b, o, w] = pipe_gen[b, o, r0]
                ob_info[b, o, w] = pipe_info[b, o, r0]
                ob_src[b, o, w] = pipe_src[b, o, r0]
                ob_cnt[b, o] += 1
    return 0


def _xp_kernel(p, groups, traffic, state, xs, log):
    for b in range(traffic.gdest.shape[0]):
        _xp_point(b, p, groups, traffic, state, xs, log)
    return 0


def _xp_kernel_threads(p, groups, traffic, state, xs, log):
    for b in numba.prange(traffic.gdest.shape[0]):
        _xp_point(b, p, groups, traffic, state, xs, log)
    return 0


#: The pipelined VOQ switch's own registers (``switch.pipeline = true``,
#: :func:`run_pl_chunk`), leading axis batch, per input ``i``: the input stage's two
#: entries ``e_valid``, ``e_gen``, ``e_info``, ``e_drops``, the copies still to write
#: ``e_rem[b, i, k, o]``, the next one ``e_pick`` (-1: none) and whether it is the last
#: ``e_last``; the head entry ``hsel``; the late counters ``took``, ``took_drops``,
#: ``stalled``. Per VOQ ``(i, o)``: write, schedule and read counts ``wptr``, ``sptr``,
#: ``rptr`` (slot = count mod depth; the flits are in the ``q_gen``/``q_info`` arrays of
#: :class:`State`), the ``notfull`` register, the side memory ``meta[b, i, o, slot]``
#: (bit 0 UNICAST, bit 1 not ``last``; zero after reset) and its registered read
#: ``meta_any``; the request registers ``valid_r``, ``single_r``. Per output: ``kill_r``,
#: the grant stage's register ``grant_r`` (-1: none), the lock ``lock_v``/``lock_in``.
#: Per input: the registered match ``match1`` (-1: none) and its side bits ``meta1``.
#: The phase bit ``phase[b]``, the two sub-schedulers' pointers ``gptr[b, s, o]``,
#: ``aptr[b, s, i]``; the flits between the match and the output-buffer write,
#: ``pipe_*[b, o, t % 8]``.
PState = namedtuple("PState", (
    "e_valid", "e_gen", "e_info", "e_drops", "e_rem", "e_pick", "e_last", "hsel", "took",
    "took_drops", "stalled", "wptr", "sptr", "rptr", "notfull", "meta", "meta_any",
    "valid_r", "single_r", "kill_r", "grant_r", "match1", "meta1", "phase", "gptr", "aptr",
    "lock_v", "lock_in", "pipe_v", "pipe_gen", "pipe_info", "pipe_src"))


def _pl_point(b, p, groups, traffic, state, ps, log):
    """Cycles ``T0 .. T0 + C - 1`` of batch point ``b``: one pipelined VOQ switch
    (rtl/switch/pipelined.py) with its links, register for register. Source queues, links
    and the output stage as in :func:`_cycles`; every decision reads the registers at the
    start of the cycle, every write takes effect in the next."""
    N = p[0]
    CAP = p[2]
    OUT_DEPTH = p[4]
    L = p[5]
    FRAME = p[6]
    K = p[7]
    SQ = p[8]
    H = p[9]
    W0 = p[10]
    W1 = p[11]
    LOG = p[12]
    T0 = p[13]
    C = p[14]
    USE_READY = p[15]
    G = p[16]
    LP = L + 1
    CR = L + 2
    ER = 2 * L + 2

    (q_gen, q_info, q_head, q_cnt, _ne, _done, _hdone, ob_gen, ob_info, ob_src, ob_head,
     ob_cnt, credit, lock, _gptr, _aptr, sq_dest, sq_size, sq_kind, sq_gen, sq_seq, sq_head,
     sq_cnt, sq_flit, seq_next, _svs, _svg, _svq, _svh, _svc, _svn, _svp, _svu, _svf, _sc,
     _scr, lp_valid, lp_gen, lp_info, tcred, cr_ret, rx_gen, rx_info, rx_head, rx_cnt,
     ecred, ecr_ret, st, hist, latmax) = state
    (e_valid, e_gen, e_info, e_drops, e_rem, e_pick, e_last, hsel, took, took_drops,
     stalled, wptr, sptr, rptr, notfull, meta, meta_any, valid_r, single_r, kill_r, grant_r,
     match1, meta1, phase, gptr, aptr, lock_v, lock_in, pipe_v, pipe_gen, pipe_info,
     pipe_src) = ps
    g_members, g_gvalid, g_slots = groups
    tr_gdest, tr_gsize, tr_gkind, tr_ready = traffic
    lg_t, lg_o, lg_src, lg_info, lg_b, lg_n = log
    logcap = lg_t.shape[0]
    hs = np.zeros(N, np.bool_)              # output handshakes of this cycle
    valid = np.zeros((N, N), np.bool_)      # requests of this cycle
    ngrant = np.empty(N, np.int64)          # the grant stage's result
    match = np.empty(N, np.int64)           # the accept stage's result (the match)
    m1 = np.empty(N, np.int64)              # match1 at the start of the cycle
    wsel = np.empty(N, np.int64)            # the VOQ written by each input (-1: none)
    gany1 = np.zeros(N, np.bool_)
    cr = np.empty(N, np.int64)
    lv = np.zeros(N, np.bool_)
    lo = np.empty(N, np.int64)
    for c in range(C):
        t = T0 + c
        in_window = (t >= W0) and (t < W1)
        framing = FRAME > 0 and (t % FRAME) == FRAME - 1
        r_slot = t % g_slots.shape[1]

        # ---- 1. traffic ------------------------------------------------------------
        for i in range(N):
            sz = tr_gsize[b, c, i]
            if sz <= 0:
                continue
            d = tr_gdest[b, c, i]
            kd = tr_gkind[b, c, i]
            copies = 1
            if kd == 1:
                copies = 0
                if d < G and g_gvalid[d]:
                    for o in range(N):
                        if g_members[d, o]:
                            copies += 1
            if in_window:
                st[b, i, 7] += sz
                st[b, i, 8] += 1
                st[b, i, 14] += copies
            if sq_cnt[b, i] >= SQ:
                st[b, i, 10] += 1
                st[b, i, 11] += sz
                continue
            slot = sq_head[b, i] + sq_cnt[b, i]
            if slot >= SQ:
                slot -= SQ
            sq_dest[b, i, slot] = d
            sq_size[b, i, slot] = sz
            sq_kind[b, i, slot] = kd
            sq_gen[b, i, slot] = t
            sq_seq[b, i, slot] = seq_next[b, i]
            seq_next[b, i] += 1
            sq_cnt[b, i] += 1

        # ---- 2. link, sender side --------------------------------------------------
        r_cr = t % CR
        s_send = (t + L) % LP
        s_arr = t % LP
        r_er = t % ER
        r_er_ret = (t + 2 * L + 1) % ER
        r_cr_ret = (t + L + 1) % CR
        for i in range(N):
            tcred[b, i] += cr_ret[b, i, r_cr]
            cr_ret[b, i, r_cr] = 0
            if (sq_cnt[b, i] > 0 and tcred[b, i] > 0 and not framing
                    and g_slots[i, r_slot]):
                h = sq_head[b, i]
                fl = sq_flit[b, i]
                sz = sq_size[b, i, h]
                first = 1 if fl == 0 else 0
                last = 1 if fl == sz - 1 else 0
                info = ((sq_seq[b, i, h] & 0xFFFFFFFF) | ((fl & 0xFFF) << 32)
                        | (first << 44) | (last << 45) | ((sq_kind[b, i, h] & 3) << 46)
                        | ((sq_dest[b, i, h] & 0xFF) << 48))
                lp_valid[b, i, s_send] = True
                lp_gen[b, i, s_send] = sq_gen[b, i, h]
                lp_info[b, i, s_send] = info
                tcred[b, i] -= 1
                if in_window:
                    st[b, i, 15] += 1
                if last == 1:
                    sq_flit[b, i] = 0
                    sq_head[b, i] = h + 1 if h + 1 < SQ else 0
                    sq_cnt[b, i] -= 1
                else:
                    sq_flit[b, i] = fl + 1
            if lp_valid[b, i, s_arr]:
                lp_valid[b, i, s_arr] = False
                w = rx_head[b, i] + rx_cnt[b, i]
                if w >= K:
                    w -= K
                rx_gen[b, i, w] = lp_gen[b, i, s_arr]
                rx_info[b, i, w] = lp_info[b, i, s_arr]
                rx_cnt[b, i] += 1

        # ---- 3. output stage (the output buffer's head, o_port) ---------------------
        for o in range(N):
            hs[o] = False
            ecred[b, o] += ecr_ret[b, o, r_er]
            ecr_ret[b, o, r_er] = 0
            if ob_cnt[b, o] == 0:
                continue
            rdy = ecred[b, o] > 0 and not framing and g_slots[o, r_slot]
            if USE_READY and not tr_ready[b, c, o]:
                rdy = False
            if not rdy:
                st[b, o, 3] += 1
                continue
            h = ob_head[b, o]
            gen = ob_gen[b, o, h]
            info = ob_info[b, o, h]
            src = ob_src[b, o, h]
            ob_head[b, o] = h + 1 if h + 1 < OUT_DEPTH else 0
            ob_cnt[b, o] -= 1
            hs[o] = True
            st[b, o, 1] += 1
            ecred[b, o] -= 1
            ecr_ret[b, o, r_er_ret] += 1
            td = t + L
            if td >= W0 and td < W1:
                st[b, o, 9] += 1
            if (info >> 45) & 1 and gen >= W0 and gen < W1:
                lat = td - gen
                st[b, o, 12] += lat
                st[b, o, 13] += 1
                hist[b, min(lat, H - 1)] += 1
                if lat > latmax[b]:
                    latmax[b] = lat
            if LOG:
                k = lg_n[0]
                if k < logcap:
                    lg_t[k] = t
                    lg_o[k] = o
                    lg_src[k] = src
                    lg_info[k] = info
                    lg_b[k] = b
                lg_n[0] = k + 1

        # ---- 4. allocator: requests, grant stage, accept stage ---------------------
        ph = phase[b]
        for i in range(N):
            m1[i] = match1[b, i]
            for o in range(N):
                valid[i, o] = (valid_r[b, i, o] and not kill_r[b, o]
                               and not (m1[i] == o and single_r[b, i, o]))
        for o in range(N):
            g = grant_r[b, o]
            opening = g >= 0 and meta_any[b, g, o] == 3
            gp = gptr[b, ph, o]
            sel = -1
            for k in range(N):
                j = gp + k
                if j >= N:
                    j -= N
                if valid[j, o] and not (opening and g != j):
                    sel = j
                    break
            ngrant[o] = sel
        for i in range(N):
            ap = aptr[b, 1 - ph, i]
            a = -1
            for k in range(N):
                o = ap + k
                if o >= N:
                    o -= N
                if grant_r[b, o] == i and valid[i, o]:
                    a = o
                    break
            match[i] = a
        # from the registered match of last cycle: locks, credits after it, the requests
        # and kills of the next cycle
        for o in range(N):
            gany1[o] = False
            lv[o] = lock_v[b, o]
            lo[o] = lock_in[b, o]
        for i in range(N):
            o = m1[i]
            if o >= 0:
                gany1[o] = True
                mb = meta1[b, i]
                if mb & 1:                      # UNICAST: the lock changes
                    lv[o] = (mb & 2) != 0
                    lo[o] = i
        for o in range(N):
            cr[o] = credit[b, o] - (1 if gany1[o] else 0)
            lock_v[b, o] = lv[o]
            lock_in[b, o] = lo[o]
            kill_r[b, o] = grant_r[b, o] >= 0 and cr[o] == 1
        for i in range(N):
            for o in range(N):
                pend = wptr[b, i, o] - sptr[b, i, o]
                valid_r[b, i, o] = (pend != 0 and cr[o] != 0
                                    and ((not lv[o]) or lo[o] == i))
                single_r[b, i, o] = pend == 1
                # side bits at sptr and sptr + 1 (writes up to last cycle), ORed
                s0 = sptr[b, i, o] % CAP
                s1 = (sptr[b, i, o] + 1) % CAP
                meta_any[b, i, o] = meta[b, i, o, s0] | meta[b, i, o, s1]
        # pointers: grant pointers of the sub-scheduler accepting now, accept pointers of
        # the one that accepted last cycle
        for i in range(N):
            o = match[i]
            if o >= 0:
                gptr[b, 1 - ph, o] = i + 1 if i + 1 < N else 0
            if m1[i] >= 0:
                aptr[b, ph, i] = m1[i] + 1 if m1[i] + 1 < N else 0
        for o in range(N):
            grant_r[b, o] = ngrant[o]
            credit[b, o] = cr[o] + (1 if hs[o] else 0)
        # the match: its side bits registered, the VOQ's schedule pointer moves, the flit
        # reaches the output buffer 7 cycles later
        r7 = (t + 7) % 8
        for i in range(N):
            o = match[i]
            match1[b, i] = o
            if o >= 0:
                s0 = sptr[b, i, o] % CAP
                meta1[b, i] = meta[b, i, o, s0]
                pipe_v[b, o, r7] = True
                pipe_gen[b, o, r7] = q_gen[b, i, o, s0]
                pipe_info[b, o, r7] = q_info[b, i, o, s0]
                pipe_src[b, o, r7] = i
        phase[b] = 1 - ph

        # ---- 5. ingress: the input stage's head writes one copy per cycle ------------
        for i in range(N):
            hsl = hsel[b, i]
            h_valid = e_valid[b, i, hsl]
            drop = e_drops[b, i, hsl] != 0
            pk = e_pick[b, i, hsl]
            write = h_valid and not drop and pk >= 0 and notfull[b, i, pk]
            take = h_valid and (drop or (write and e_last[b, i, hsl]))
            wsel[i] = pk if write else -1
            if write:
                w = wptr[b, i, pk] % CAP
                info = e_info[b, i, hsl]
                q_gen[b, i, pk, w] = e_gen[b, i, hsl]
                q_info[b, i, pk, w] = info
                meta[b, i, pk, w] = ((1 if ((info >> 46) & 3) == 0 else 0)
                                     | (2 if ((info >> 45) & 1) == 0 else 0))
            # the late counters: last cycle's take and stall count now
            if took[b, i]:
                dr = took_drops[b, i]
                if dr == 0:
                    st[b, i, 0] += 1
                st[b, i, 4] += dr & 1
                st[b, i, 5] += (dr >> 1) & 1
                st[b, i, 6] += (dr >> 2) & 1
            if stalled[b, i]:
                st[b, i, 2] += 1
            took[b, i] = take
            took_drops[b, i] = e_drops[b, i, hsl]
            prdy = not (e_valid[b, i, 0] and e_valid[b, i, 1])
            pv = rx_cnt[b, i] > 0
            stalled[b, i] = pv and not prdy
            enq = pv and prdy
            fl = (1 - hsl) if h_valid else hsl
            if take:
                e_valid[b, i, hsl] = False
            elif write:                 # plan the rest of the copies
                e_rem[b, i, hsl, pk] = False
                nx = -1
                nrem = 0
                for o in range(N):
                    if e_rem[b, i, hsl, o]:
                        nrem += 1
                        if nx < 0:
                            nx = o
                e_pick[b, i, hsl] = nx
                e_last[b, i, hsl] = nrem <= 1
            if enq:
                h = rx_head[b, i]
                info = rx_info[b, i, h]
                e_valid[b, i, fl] = True
                e_gen[b, i, fl] = rx_gen[b, i, h]
                e_info[b, i, fl] = info
                rx_head[b, i] = h + 1 if h + 1 < K else 0
                rx_cnt[b, i] -= 1
                cr_ret[b, i, r_cr_ret] += 1
                kd = (info >> 46) & 3
                d = (info >> 48) & 0xFF
                dr = 0
                for o in range(N):
                    e_rem[b, i, fl, o] = False
                if kd == 0:
                    if d < N:
                        e_rem[b, i, fl, d] = True
                    else:
                        dr = 1
                elif kd == 1:
                    dr = 2
                    if d < G and g_gvalid[d]:
                        for o in range(N):
                            if g_members[d, o]:
                                e_rem[b, i, fl, o] = True
                                dr = 0
                else:
                    dr = 4
                e_drops[b, i, fl] = dr
                nx = -1
                nrem = 0
                for o in range(N):
                    if e_rem[b, i, fl, o]:
                        nrem += 1
                        if nx < 0:
                            nx = o
                e_pick[b, i, fl] = nx
                e_last[b, i, fl] = nrem <= 1
            if take:
                hsel[b, i] = 1 - hsl

        # ---- 6. the VOQs' pointers and "not full" registers --------------------------
        for i in range(N):
            for o in range(N):
                rd = m1[i] == o
                wr = wsel[i] == o
                used = wptr[b, i, o] - rptr[b, i, o]
                full_next = (not rd) and (used == CAP or (used == CAP - 1 and wr))
                notfull[b, i, o] = not full_next
                if wr:
                    wptr[b, i, o] += 1
                if match[i] == o:
                    sptr[b, i, o] += 1
                if rd:
                    rptr[b, i, o] += 1
        # the crossbar register writes the output buffer (matched 7 cycles ago)
        r0 = t % 8
        for o in range(N):
            if pipe_v[b, o, r0]:
                pipe_v[b, o, r0] = False
                w = ob_head[b, o] + ob_cnt[b, o]
                if w >= OUT_DEPTH:
                    w -= OUT_DEPTH
                ob_gen[b, o, w] = pipe_gen[b, o, r0]
                ob_info[b, o, w] = pipe_info[b, o, r0]
                ob_src[b, o, w] = pipe_src[b, o, r0]
                ob_cnt[b, o] += 1
    return 0


def _pl_kernel(p, groups, traffic, state, ps, log):
    for b in range(traffic.gdest.shape[0]):
        _pl_point(b, p, groups, traffic, state, ps, log)
    return 0


def _pl_kernel_threads(p, groups, traffic, state, ps, log):
    for b in numba.prange(traffic.gdest.shape[0]):
        _pl_point(b, p, groups, traffic, state, ps, log)
    return 0


#: The reduction units of the ``reduce=True`` VOQ switch (``switch.reduce = true``,
#: :func:`run_rd_chunk`), leading axis batch. The crossbar is ``2n x 2n``: rows and columns
#: ``n + u`` are unit ``u``'s result output and contribution input, in the ``State`` arrays
#: (sized ``2n`` along their row and column axes: VOQs, ``done``, output buffers, credits,
#: locks, iSLIP pointers). Static: ``gmode[g]`` (0 ALLREDUCE, 1 REDUCE) and ``groot[g]`` of
#: each group. Per unit ``u``: the ingest register ``s1_v``/``s1_info``/``s1_src``; the
#: open-chunk table ``sl_state[b, u, j]`` (0 free, 1 open, 2 complete), ``sl_group``,
#: ``sl_chunk``, ``sl_arr[b, u, j, port]`` (contributed), ``sl_cnt``, ``sl_k`` (members);
#: the ready FIFO of complete slots ``rf_buf``/``rf_head``/``rf_cnt``; the streamer
#: ``sa`` (active), ``sslot``, ``srank``, ``sk``; the pipeline after the streamer as a ring
#: over the unit's advancing cycles (``acnt``): ``pr_v[b, u, a % R]``, ``pr_info`` is the
#: result flit in ``o_result`` when ``acnt == a`` (``R`` = pipeline length + 1); the result
#: FIFO of ``RESULT_FIFO_DEPTH`` = 4 flits ``rq_info``/``rq_head``/``rq_cnt``; the counters
#: ``ust[b, u, k]`` in the order of ``o_unit_stats`` (contributions, results, duplicate,
#: nonmember, invalid, full_cycles, result_drops).
RState = namedtuple("RState", (
    "gmode", "groot", "s1_v", "s1_info", "s1_src", "sl_state", "sl_group", "sl_chunk",
    "sl_arr", "sl_cnt", "sl_k", "rf_buf", "rf_head", "rf_cnt", "sa", "sslot", "srank", "sk",
    "pr_v", "pr_info", "acnt", "rq_info", "rq_head", "rq_cnt", "ust"))

#: A result flit's sequence field in the departure log: this bit, the group in bits
#: 16..23 and the chunk in bits 0..15 (a result is no packet of a source).
RESULT_TAG = 1 << 31
#: A REDUCE or RESULT flit's chunk rides in bits 56..63 of the info word (the model
#: carries chunks 0..255; traffic encodes it as ``dest | chunk << 8``).
CHUNK_SHIFT = 56


def _rd_point(b, p, groups, traffic, state, rs, log):
    """Cycles ``T0 .. T0 + C - 1`` of batch point ``b``: one VOQ switch with ``reduce=True``
    (rtl/switch/voq_switch.py with rtl/switch/ingress.py, output.py and rtl/reduce/unit.py):
    the ``2n x 2n`` crossbar, iSLIP over ``2n`` rows and columns, and per port a reduction
    unit behind column ``n + u`` whose results enter row ``n + u`` through a FIFO of 4.
    Source queues, links and the port outputs as in :func:`_cycles`; every decision reads
    the registers at the start of the cycle, every write takes effect in the next.

    A REDUCE flit from a port goes to unit ``chunk mod n``; a RESULT flit from a port is
    dropped (``drop_kind``). A unit takes a contribution into its ingest register when the
    register is empty or its flit is done this cycle (invalid group, not a member,
    duplicate, a contribution to an open chunk, or the opening of a free slot; with every
    slot busy it waits and ``full_cycles`` counts). A chunk complete goes into the ready
    FIFO (visible a cycle later); the streamer reads a chunk's ``k`` contributions one per
    advancing cycle and frees its slot after the last; the result is in ``o_result``
    ``3 + 5 depth`` advancing cycles after the last read (``depth = ceil(log2 n)``). The
    unit advances when ``o_result`` is empty or the result FIFO has room (4 entries, its
    level at the start of the cycle). The result row replicates a result one copy per cycle,
    lowest member first (ALLREDUCE: the group's members; REDUCE: its root, dropped and
    counted in ``result_drops`` when the root is no port)."""
    N = p[0]
    CAP = p[2]
    ITERS = p[3]
    OUT_DEPTH = p[4]
    L = p[5]
    FRAME = p[6]
    K = p[7]
    SQ = p[8]
    H = p[9]
    W0 = p[10]
    W1 = p[11]
    LOG = p[12]
    T0 = p[13]
    C = p[14]
    USE_READY = p[15]
    G = p[16]
    LP = L + 1
    CR = L + 2
    ER = 2 * L + 2
    N2 = 2 * N
    RQD = 4                             # RESULT_FIFO_DEPTH

    (q_gen, q_info, q_head, q_cnt, _ne, done, _hdone, ob_gen, ob_info, ob_src, ob_head,
     ob_cnt, credit, lock, gptr, aptr, sq_dest, sq_size, sq_kind, sq_gen, sq_seq, sq_head,
     sq_cnt, sq_flit, seq_next, _svs, _svg, _svq, _svh, _svc, _svn, _svp, _svu, _svf, _sc,
     _scr, lp_valid, lp_gen, lp_info, tcred, cr_ret, rx_gen, rx_info, rx_head, rx_cnt,
     ecred, ecr_ret, st, hist, latmax) = state
    (gmode, groot, s1_v, s1_info, s1_src, sl_state, sl_group, sl_chunk, sl_arr, sl_cnt, sl_k,
     rf_buf, rf_head, rf_cnt, sa, sslot, srank, sk, pr_v, pr_info, acnt, rq_info, rq_head,
     rq_cnt, ust) = rs
    g_members, g_gvalid, g_slots = groups
    tr_gdest, tr_gsize, tr_gkind, tr_ready = traffic
    lg_t, lg_o, lg_src, lg_info, lg_b, lg_n = log
    logcap = lg_t.shape[0]
    NCH = sl_state.shape[2]
    R = pr_v.shape[2]
    PL = R - 1
    cred_inc = np.zeros(N2, np.int64)
    matched_in = np.empty(N2, np.int64)
    matched_out = np.empty(N2, np.int64)
    grant = np.empty(N2, np.int64)
    best = np.empty(N2, np.int64)
    bestd = np.empty(N2, np.int64)
    popped = np.empty(N2, np.int64)
    rq_push = np.empty(N, np.int64)     # the result each unit hands to its FIFO (-1: none)
    rq_push_v = np.zeros(N, np.bool_)
    for c in range(C):
        t = T0 + c
        in_window = (t >= W0) and (t < W1)
        framing = FRAME > 0 and (t % FRAME) == FRAME - 1
        r_slot = t % g_slots.shape[1]

        # ---- 1. traffic ------------------------------------------------------------
        for i in range(N):
            sz = tr_gsize[b, c, i]
            if sz <= 0:
                continue
            d = tr_gdest[b, c, i]
            kd = tr_gkind[b, c, i]
            copies = 1
            if kd == 1:
                copies = 0
                if d < G and g_gvalid[d]:
                    for o in range(N):
                        if g_members[d, o]:
                            copies += 1
            if in_window:
                st[b, i, 7] += sz
                st[b, i, 8] += 1
                st[b, i, 14] += copies
            if sq_cnt[b, i] >= SQ:
                st[b, i, 10] += 1
                st[b, i, 11] += sz
                continue
            slot = sq_head[b, i] + sq_cnt[b, i]
            if slot >= SQ:
                slot -= SQ
            sq_dest[b, i, slot] = d
            sq_size[b, i, slot] = sz
            sq_kind[b, i, slot] = kd
            sq_gen[b, i, slot] = t
            sq_seq[b, i, slot] = seq_next[b, i]
            seq_next[b, i] += 1
            sq_cnt[b, i] += 1

        # ---- 2. link, sender side --------------------------------------------------
        r_cr = t % CR
        s_send = (t + L) % LP
        s_arr = t % LP
        r_er = t % ER
        r_er_ret = (t + 2 * L + 1) % ER
        r_cr_ret = (t + L + 1) % CR
        for i in range(N):
            tcred[b, i] += cr_ret[b, i, r_cr]
            cr_ret[b, i, r_cr] = 0
            if (sq_cnt[b, i] > 0 and tcred[b, i] > 0 and not framing
                    and g_slots[i, r_slot]):
                h = sq_head[b, i]
                fl = sq_flit[b, i]
                sz = sq_size[b, i, h]
                kd = sq_kind[b, i, h]
                first = 1 if fl == 0 else 0
                last = 1 if fl == sz - 1 else 0
                dd = sq_dest[b, i, h]
                info = ((sq_seq[b, i, h] & 0xFFFFFFFF) | ((fl & 0xFFF) << 32)
                        | (first << 44) | (last << 45) | ((kd & 3) << 46)
                        | ((dd & 0xFF) << 48))
                if kd >= 2:                 # flit f of a reduction packet: chunk + f
                    info |= (((dd >> 8) + fl) & 0xFF) << CHUNK_SHIFT
                lp_valid[b, i, s_send] = True
                lp_gen[b, i, s_send] = sq_gen[b, i, h]
                lp_info[b, i, s_send] = info
                tcred[b, i] -= 1
                if in_window:
                    st[b, i, 15] += 1
                if last == 1:
                    sq_flit[b, i] = 0
                    sq_head[b, i] = h + 1 if h + 1 < SQ else 0
                    sq_cnt[b, i] -= 1
                else:
                    sq_flit[b, i] = fl + 1
            if lp_valid[b, i, s_arr]:
                lp_valid[b, i, s_arr] = False
                w = rx_head[b, i] + rx_cnt[b, i]
                if w >= K:
                    w -= K
                rx_gen[b, i, w] = lp_gen[b, i, s_arr]
                rx_info[b, i, w] = lp_info[b, i, s_arr]
                rx_cnt[b, i] += 1

        # ---- 3. port outputs (the output buffer's head, o_port) ---------------------
        for o in range(N):
            cred_inc[o] = 0
            ecred[b, o] += ecr_ret[b, o, r_er]
            ecr_ret[b, o, r_er] = 0
            if ob_cnt[b, o] == 0:
                continue
            rdy = ecred[b, o] > 0 and not framing and g_slots[o, r_slot]
            if USE_READY and not tr_ready[b, c, o]:
                rdy = False
            if not rdy:
                st[b, o, 3] += 1
                continue
            h = ob_head[b, o]
            gen = ob_gen[b, o, h]
            info = ob_info[b, o, h]
            src = ob_src[b, o, h]
            ob_head[b, o] = h + 1 if h + 1 < OUT_DEPTH else 0
            ob_cnt[b, o] -= 1
            cred_inc[o] = 1
            st[b, o, 1] += 1
            ecred[b, o] -= 1
            ecr_ret[b, o, r_er_ret] += 1
            td = t + L
            if td >= W0 and td < W1:
                st[b, o, 9] += 1
            if (info >> 45) & 1 and gen >= W0 and gen < W1:
                lat = td - gen
                st[b, o, 12] += lat
                st[b, o, 13] += 1
                hist[b, min(lat, H - 1)] += 1
                if lat > latmax[b]:
                    latmax[b] = lat
            if LOG:
                k = lg_n[0]
                if k < logcap:
                    lg_t[k] = t
                    lg_o[k] = o
                    lg_src[k] = src
                    lg_info[k] = info
                    lg_b[k] = b
                lg_n[0] = k + 1

        # ---- 3b. the units: ingest register, open-chunk table, streamer, pipeline -----
        for u in range(N):
            col = N + u
            cred_inc[col] = 0
            rf0 = rf_cnt[b, u]                  # the ready FIFO's level at the start
            fin = True                          # the ingest register's flit is done
            if s1_v[b, u]:
                info = s1_info[b, u]
                g = (info >> 48) & 0xFF
                ch = (info >> CHUNK_SHIFT) & 0xFF
                src = s1_src[b, u]
                if not (g < G and g_gvalid[g]):
                    ust[b, u, 4] += 1
                elif not g_members[g, src]:
                    ust[b, u, 3] += 1
                else:
                    k_members = 0
                    for o in range(N):
                        if g_members[g, o]:
                            k_members += 1
                    hit = -1
                    free = -1
                    for j in range(NCH):
                        s_ = sl_state[b, u, j]
                        if s_ != 0:
                            if hit < 0 and sl_group[b, u, j] == g and sl_chunk[b, u, j] == ch:
                                hit = j
                        elif free < 0:
                            free = j
                    newly = -1
                    if hit >= 0:
                        if sl_arr[b, u, hit, src]:
                            ust[b, u, 2] += 1
                        else:
                            ust[b, u, 0] += 1
                            sl_arr[b, u, hit, src] = True
                            sl_cnt[b, u, hit] += 1
                            if sl_cnt[b, u, hit] == sl_k[b, u, hit]:
                                sl_state[b, u, hit] = 2
                                newly = hit
                    elif free >= 0:
                        ust[b, u, 0] += 1
                        for o in range(N):
                            sl_arr[b, u, free, o] = False
                        sl_arr[b, u, free, src] = True
                        sl_group[b, u, free] = g
                        sl_chunk[b, u, free] = ch
                        sl_cnt[b, u, free] = 1
                        sl_k[b, u, free] = k_members
                        sl_state[b, u, free] = 2 if k_members == 1 else 1
                        if k_members == 1:
                            newly = free
                    else:
                        ust[b, u, 5] += 1
                        fin = False
                    if newly >= 0:
                        w = rf_head[b, u] + rf_cnt[b, u]
                        if w >= NCH:
                            w -= NCH
                        rf_buf[b, u, w] = newly
                        rf_cnt[b, u] += 1
            if fin:                             # i_contrib.ready: take the column's head
                if ob_cnt[b, col] > 0:
                    h = ob_head[b, col]
                    s1_v[b, u] = True
                    s1_info[b, u] = ob_info[b, col, h]
                    s1_src[b, u] = ob_src[b, col, h]
                    ob_head[b, col] = h + 1 if h + 1 < OUT_DEPTH else 0
                    ob_cnt[b, col] -= 1
                    cred_inc[col] = 1
                else:
                    s1_v[b, u] = False
            # streamer and pipeline: advance when o_result is empty or the FIFO has room
            a = acnt[b, u]
            ra = a % R
            ovalid = pr_v[b, u, ra]
            rq_push_v[u] = False
            if ovalid and rq_cnt[b, u] >= RQD:
                continue
            if ovalid:
                rq_push_v[u] = True
                rq_push[u] = pr_info[b, u, ra]
                pr_v[b, u, ra] = False
                ust[b, u, 1] += 1
            active = sa[b, u]
            issue_last = active and srank[b, u] == sk[b, u] - 1
            if active:
                srank[b, u] += 1
                if issue_last:
                    j = sslot[b, u]
                    sa[b, u] = False
                    sl_state[b, u, j] = 0
                    g = sl_group[b, u, j]
                    rp = (a + PL) % R
                    pr_v[b, u, rp] = True
                    pr_info[b, u, rp] = ((RESULT_TAG | (g << 16) | sl_chunk[b, u, j])
                                         | (1 << 44) | (1 << 45) | (3 << 46) | (g << 48)
                                         | (sl_chunk[b, u, j] << CHUNK_SHIFT))
            if ((not active) or issue_last) and rf0 > 0:
                h = rf_head[b, u]
                j = rf_buf[b, u, h]
                rf_head[b, u] = h + 1 if h + 1 < NCH else 0
                rf_cnt[b, u] -= 1
                sa[b, u] = True
                srank[b, u] = 0
                sslot[b, u] = j
                sk[b, u] = sl_k[b, u, j]
            acnt[b, u] = a + 1

        # ---- 4. allocator: iSLIP over 2n rows and columns ---------------------------
        for i in range(N2):
            matched_in[i] = -1
            matched_out[i] = -1
            popped[i] = -1
        for rnd in range(ITERS):
            any_grant = False
            for o in range(N2):
                grant[o] = -1
                if matched_out[o] >= 0 or credit[b, o] <= 0:
                    continue
                lk = lock[b, o]
                if lk >= 0:
                    if q_cnt[b, lk, o] > 0 and matched_in[lk] < 0:
                        grant[o] = lk
                        any_grant = True
                    continue
                g0 = gptr[b, o]
                for k in range(N2):
                    j = g0 + k
                    if j >= N2:
                        j -= N2
                    if matched_in[j] < 0 and q_cnt[b, j, o] > 0:
                        grant[o] = j
                        any_grant = True
                        break
            if not any_grant:
                break
            for i in range(N2):
                best[i] = -1
                bestd[i] = N2
            for o in range(N2):
                i = grant[o]
                if i >= 0:
                    d = o - aptr[b, i]
                    if d < 0:
                        d += N2
                    if d < bestd[i]:
                        bestd[i] = d
                        best[i] = o
            for i in range(N2):
                o = best[i]
                if o >= 0:
                    matched_in[i] = o
                    matched_out[o] = i
                    if rnd == 0:
                        aptr[b, i] = o + 1 if o + 1 < N2 else 0
                        gptr[b, o] = i + 1 if i + 1 < N2 else 0
        for i in range(N2):
            o = matched_in[i]
            if o < 0:
                continue
            h = q_head[b, i, o]
            info = q_info[b, i, o, h]
            w = ob_head[b, o] + ob_cnt[b, o]
            if w >= OUT_DEPTH:
                w -= OUT_DEPTH
            ob_gen[b, o, w] = q_gen[b, i, o, h]
            ob_info[b, o, w] = info
            ob_src[b, o, w] = i if i < N else i - N     # a result's src is its unit
            ob_cnt[b, o] += 1
            credit[b, o] -= 1
            if ((info >> 46) & 3) == 0:
                lock[b, o] = -1 if (info >> 45) & 1 else i
            q_head[b, i, o] = h + 1 if h + 1 < CAP else 0
            q_cnt[b, i, o] -= 1
            popped[i] = o

        # ---- 5. ingress: port rows from the links, unit rows from the result FIFOs ---
        for r in range(N2):
            if r < N:
                if rx_cnt[b, r] == 0:
                    continue
                h = rx_head[b, r]
                info = rx_info[b, r, h]
                gen = rx_gen[b, r, h]
            else:
                u = r - N
                if rq_cnt[b, u] == 0:
                    continue
                h = rq_head[b, u]
                info = rq_info[b, u, h]
                gen = -1
            kd = (info >> 46) & 3
            d = (info >> 48) & 0xFF
            drop = 0                            # bit 0 dest, 1 group, 2 kind
            target = -1
            lastcopy = True
            if r >= N:                          # a result: members, or the root
                if gmode[d] == 0:
                    for o in range(N):
                        if g_members[d, o] and not done[b, r, o]:
                            if target < 0:
                                target = o
                            else:
                                lastcopy = False
                                break
                    if target < 0:
                        drop = 1
                elif groot[d] < N:
                    target = groot[d]
                else:
                    drop = 1
            elif kd == 0:
                if d < N:
                    target = d
                else:
                    drop = 1
            elif kd == 1:
                if d < G and g_gvalid[d]:
                    for o in range(N):
                        if g_members[d, o] and not done[b, r, o]:
                            if target < 0:
                                target = o
                            else:
                                lastcopy = False
                                break
                if target < 0:
                    drop = 2
            elif kd == 2:
                target = N + ((info >> CHUNK_SHIFT) & 0xFF) % N
            else:
                drop = 4
            rdy = drop != 0
            if drop == 0:
                cnt0 = q_cnt[b, r, target] + (1 if popped[r] == target else 0)
                if cnt0 < CAP:
                    w = q_head[b, r, target] + q_cnt[b, r, target]
                    if w >= CAP:
                        w -= CAP
                    q_gen[b, r, target, w] = gen
                    q_info[b, r, target, w] = info
                    q_cnt[b, r, target] += 1
                    if lastcopy:
                        rdy = True
                        for o in range(N):
                            done[b, r, o] = False
                    else:
                        done[b, r, target] = True
            if r < N:
                if rdy:
                    if drop == 0:
                        st[b, r, 0] += 1
                    st[b, r, 4] += drop & 1
                    st[b, r, 5] += (drop >> 1) & 1
                    st[b, r, 6] += (drop >> 2) & 1
                    rx_head[b, r] = h + 1 if h + 1 < K else 0
                    cr_ret[b, r, r_cr_ret] += 1
                    rx_cnt[b, r] -= 1
                else:
                    st[b, r, 2] += 1
            elif rdy:
                u = r - N
                if drop != 0:
                    ust[b, u, 6] += 1
                rq_head[b, u] = h + 1 if h + 1 < RQD else 0
                rq_cnt[b, u] -= 1

        # ---- 5b. the results the units handed over enter their FIFOs ----------------
        for u in range(N):
            if rq_push_v[u]:
                w = rq_head[b, u] + rq_cnt[b, u]
                if w >= RQD:
                    w -= RQD
                rq_info[b, u, w] = rq_push[u]
                rq_cnt[b, u] += 1

        # ---- 6. credits ----------------------------------------------------------------
        for o in range(N2):
            credit[b, o] += cred_inc[o]
    return 0


def _rd_kernel(p, groups, traffic, state, rs, log):
    for b in range(traffic.gdest.shape[0]):
        _rd_point(b, p, groups, traffic, state, rs, log)
    return 0


def _rd_kernel_threads(p, groups, traffic, state, rs, log):
    for b in numba.prange(traffic.gdest.shape[0]):
        _rd_point(b, p, groups, traffic, state, rs, log)
    return 0


_jit = dict(cache=True, nogil=True, error_model="numpy")
ecmp_hash = numba.njit(**_jit)(ecmp_hash)
_uplink = numba.njit(**_jit)(_uplink)
_route = numba.njit(**_jit)(_route)
_voq_send = numba.njit(**_jit)(_voq_send)
_cycles = numba.njit(**_jit)(_cycles)
_point = numba.njit(**_jit)(_point)
_clos_point = numba.njit(**_jit)(_clos_point)
#: ``run_chunk(p, groups, traffic, state, log)``: advance ``p[P["C"]]`` cycles.
run_chunk = numba.njit(**_jit)(_kernel)
_threads = None


def run_chunk_parallel(p, groups, traffic, state, log):
    """:func:`run_chunk` with the batch points on threads (compiled on first use)."""
    global _threads
    if _threads is None:
        _threads = numba.njit(parallel=True, **_jit)(_kernel_threads)
    return _threads(p, groups, traffic, state, log)


#: ``run_clos_chunk(p, groups, traffic, state, log, net)``: advance every Clos batch point
#: ``p[P["C"]]`` cycles (traffic rows are batch points, columns endpoints).
run_clos_chunk = numba.njit(**_jit)(_clos_kernel)
_clos_threads = None


def run_clos_chunk_parallel(p, groups, traffic, state, log, net):
    """:func:`run_clos_chunk` with the batch points on threads (compiled on first use)."""
    global _clos_threads
    if _clos_threads is None:
        _clos_threads = numba.njit(parallel=True, **_jit)(_clos_kernel_threads)
    old = numba.set_parallel_chunksize(1)
    try:
        return _clos_threads(p, groups, traffic, state, log, net)
    finally:
        numba.set_parallel_chunksize(old)


_xp_point = numba.njit(**_jit)(_xp_point)
#: ``run_xp_chunk(p, groups, traffic, state, xstate, log)``: the crosspoint-buffered switch
#: (:class:`XState`), ``p[P["C"]]`` cycles of every batch point.
run_xp_chunk = numba.njit(**_jit)(_xp_kernel)
_xp_threads = None


def run_xp_chunk_parallel(p, groups, traffic, state, xstate, log):
    """:func:`run_xp_chunk` with the batch points on threads (compiled on first use)."""
    global _xp_threads
    if _xp_threads is None:
        _xp_threads = numba.njit(parallel=True, **_jit)(_xp_kernel_threads)
    return _xp_threads(p, groups, traffic, state, xstate, log)


_pl_point = numba.njit(**_jit)(_pl_point)
#: ``run_pl_chunk(p, groups, traffic, state, pstate, log)``: the pipelined VOQ switch
#: (:class:`PState`), ``p[P["C"]]`` cycles of every batch point.
run_pl_chunk = numba.njit(**_jit)(_pl_kernel)
_pl_threads = None


def run_pl_chunk_parallel(p, groups, traffic, state, pstate, log):
    """:func:`run_pl_chunk` with the batch points on threads (compiled on first use)."""
    global _pl_threads
    if _pl_threads is None:
        _pl_threads = numba.njit(parallel=True, **_jit)(_pl_kernel_threads)
    return _pl_threads(p, groups, traffic, state, pstate, log)


_rd_point = numba.njit(**_jit)(_rd_point)
#: ``run_rd_chunk(p, groups, traffic, state, rstate, log)``: the VOQ switch with reduction
#: units (:class:`RState`), ``p[P["C"]]`` cycles of every batch point.
run_rd_chunk = numba.njit(**_jit)(_rd_kernel)
_rd_threads = None


def run_rd_chunk_parallel(p, groups, traffic, state, rstate, log):
    """:func:`run_rd_chunk` with the batch points on threads (compiled on first use)."""
    global _rd_threads
    if _rd_threads is None:
        _rd_threads = numba.njit(parallel=True, **_jit)(_rd_kernel_threads)
    return _rd_threads(p, groups, traffic, state, rstate, log)
