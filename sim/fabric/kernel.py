"""The cycle kernel: one switch plus its links, every rule of docs/switch.md, per cycle.

Written as plain scalar loops over ``(batch point, cycle, port)`` so that numba compiles
it when installed (:data:`HAVE_NUMBA`); :mod:`fusionfabric.sim.fabric.vkernel` is the numpy-vectorized
equivalent used without numba. Both are driven by :class:`fusionfabric.sim.fabric.engine.Fabric`,
which owns the arrays; the two must agree bit for bit (tests/test_model_engine.py).

Order of evaluation inside cycle ``t`` (every decision reads the state at the start of t;
writes take effect for t+1, as in the RTL):

1. traffic: packets created in t enter their source queue (overflow: counted drop);
2. link, sender side: credits returned for t arrive; a source with a credit and no
   framing slot puts its next flit on the link; flits that left ``latency`` cycles ago
   enter the link's receive FIFO, whose head is ``i_port[i]`` (latency 0: same cycle);
3. output stage: ``o_port[o]`` valid = output buffer non-empty; ready = the output-ready
   pattern and no framing slot and an egress credit; a handshake pops, delivers at
   ``t + latency`` and returns one switch credit for t+1;
4. allocator: requests from VOQ counts, credits and locks at the start of t; iSLIP rounds;
   round-1 matches move the pointers; matched heads move to the output buffers
   (credit - 1), VOQs pop (FIFO mode: per-member ``hdone``), unicast flits lock/unlock;
5. ingress: ``i_port[i]`` head is routed (drops counted), the VOQ space check uses the
   count at the start of t (a pop in t does not free space for t), multicast copies are
   written one per cycle lowest member first; a handshake pops the receive FIFO and sends
   the link credit back (usable by the sender at t + latency + 1);
6. credits: ``credit[o] += handshakes of step 3``.
"""

from __future__ import annotations

import os

import numpy as np

try:  # numba is optional: the numpy kernel (vkernel) is the fallback
    if os.environ.get("FF_NO_NUMBA"):      # FF_NO_NUMBA=1: behave as if not installed
        raise ImportError("FF_NO_NUMBA is set")
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - depends on the environment
    numba = None
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA", "run_chunk", "P", "S", "INFO", "pack_info"]

# integer parameters, packed in one int64 array (index names)
P = {name: k for k, name in enumerate((
    "N", "FIFO", "CAP", "ITERS", "OUT_DEPTH", "L", "FRAME", "K", "SQ", "H", "W0", "W1",
    "LOG", "T0", "C", "USE_READY", "G", "ECRED"))}

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


def _point(b, p, members, gvalid,
            gdest, gsize, gkind, ready,
            q_gen, q_info, q_head, q_cnt, ne, done, hdone,
            ob_gen, ob_info, ob_src, ob_head, ob_cnt,
            credit, lock, gptr, aptr,
            sq_dest, sq_size, sq_kind, sq_gen, sq_seq, sq_head, sq_cnt, sq_flit,
            seq_next,
            lp_valid, lp_gen, lp_info, tcred, cr_ret,
            rx_gen, rx_info, rx_head, rx_cnt,
            ecred, ecr_ret,
            st, hist, latmax,
            log_t, log_o, log_src, log_info, log_b, log_n):
    N = p[0]
    FIFO = p[1]
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
    LP = L + 1           # flit delay line slots
    CR = L + 2           # link credit return ring
    ER = 2 * L + 2       # egress credit return ring
    logcap = log_t.shape[0]

    W = ne.shape[2]
    ONE = np.uint64(1)
    ALL = np.uint64(0xFFFFFFFFFFFFFFFF)

    if True:
        # scratch, per batch point (so that points may run in parallel threads)
        matched_in = np.empty(N, np.int64)
        matched_out = np.empty(N, np.int64)
        grant = np.empty(N, np.int64)
        best = np.empty(N, np.int64)
        bestd = np.empty(N, np.int64)
        popped = np.empty(N, np.int64)
        cred_inc = np.empty(N, np.int64)
        head_dest = np.empty(N, np.int64)
        head_kind = np.empty(N, np.int64)
        rb = np.zeros((N, W), np.uint64)    # FIFO mode: requests of the heads, per output
        freeb = np.empty(W, np.uint64)      # inputs not matched yet
        for c in range(C):
            t = T0 + c
            in_window = (t >= W0) and (t < W1)
            framing = FRAME > 0 and (t % FRAME) == FRAME - 1

            # ---- 1. traffic --------------------------------------------------------
            for i in range(N):
                sz = gsize[b, c, i]
                if sz <= 0:
                    continue
                d = gdest[b, c, i]
                kd = gkind[b, c, i]
                copies = 1
                if kd == 1:
                    copies = 0
                    if d < G and gvalid[d]:
                        for o in range(N):
                            if members[d, o]:
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

            # ---- 2. link, sender side ----------------------------------------------
            r_cr = t % CR
            s_send = (t + L) % LP
            s_arr = t % LP
            r_er = t % ER
            r_er_ret = (t + 2 * L + 1) % ER
            r_cr_ret = (t + L + 1) % CR
            for i in range(N):
                r = r_cr
                tcred[b, i] += cr_ret[b, i, r]
                cr_ret[b, i, r] = 0
                if sq_cnt[b, i] > 0 and tcred[b, i] > 0 and not framing:
                    h = sq_head[b, i]
                    fl = sq_flit[b, i]
                    sz = sq_size[b, i, h]
                    first = 1 if fl == 0 else 0
                    last = 1 if fl == sz - 1 else 0
                    info = ((sq_seq[b, i, h] & 0xFFFFFFFF) | ((fl & 0xFFF) << 32)
                            | (first << 44) | (last << 45)
                            | ((sq_kind[b, i, h] & 3) << 46)
                            | ((sq_dest[b, i, h] & 0xFF) << 48))
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

            # ---- 3. output stage ---------------------------------------------------
            for o in range(N):
                cred_inc[o] = 0
                r = r_er
                ecred[b, o] += ecr_ret[b, o, r]
                ecr_ret[b, o, r] = 0
                if ob_cnt[b, o] == 0:
                    continue
                rdy = ecred[b, o] > 0 and not framing
                if USE_READY and not ready[b, c, o]:
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
                    k = log_n[0]
                    if k < logcap:
                        log_t[k] = t
                        log_o[k] = o
                        log_src[k] = src
                        log_info[k] = info
                        log_b[k] = b
                    log_n[0] = k + 1

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
                                if members[head_dest[i], o] and not hdone[b, i, o]:
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
                            if members[hd, o2] and not hdone[b, i, o2]:
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

            # ---- 5. ingress ------------------------------------------------------------
            for i in range(N):
                if rx_cnt[b, i] == 0:
                    continue
                h = rx_head[b, i]
                info = rx_info[b, i, h]
                kd = (info >> 46) & 3
                d = (info >> 48) & 0xFF
                rdy = False
                if kd == 0:
                    if d >= N:
                        st[b, i, 4] += 1
                        rdy = True
                        drop = True
                    else:
                        drop = False
                elif kd == 1:
                    drop = True
                    if d < G and gvalid[d]:
                        for o in range(N):
                            if members[d, o]:
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
                        if kd == 0:
                            target = d
                            lastcopy = True
                        else:
                            target = -1
                            lastcopy = True
                            for o in range(N):
                                if members[d, o] and not done[b, i, o]:
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
                    rx_head[b, i] = h + 1 if h + 1 < K else 0
                    rx_cnt[b, i] -= 1
                    cr_ret[b, i, r_cr_ret] += 1
                else:
                    st[b, i, 2] += 1

            # ---- 6. credits ------------------------------------------------------------
            for o in range(N):
                credit[b, o] += cred_inc[o]
    return 0


def _kernel(p, members, gvalid, gdest, gsize, gkind, ready, q_gen, q_info, q_head, q_cnt, ne,
            done, hdone, ob_gen, ob_info, ob_src, ob_head, ob_cnt, credit, lock, gptr, aptr,
            sq_dest, sq_size, sq_kind, sq_gen, sq_seq, sq_head, sq_cnt, sq_flit, seq_next,
            lp_valid, lp_gen, lp_info, tcred, cr_ret, rx_gen, rx_info, rx_head, rx_cnt, ecred,
            ecr_ret, st, hist, latmax, log_t, log_o, log_src, log_info, log_b, log_n):
    """All batch points, one after the other (the plain-Python reference entry point)."""
    for b in range(gdest.shape[0]):
        _point(b, p, members, gvalid, gdest, gsize, gkind, ready, q_gen, q_info, q_head, q_cnt, ne,
            done, hdone, ob_gen, ob_info, ob_src, ob_head, ob_cnt, credit, lock, gptr, aptr,
            sq_dest, sq_size, sq_kind, sq_gen, sq_seq, sq_head, sq_cnt, sq_flit, seq_next,
            lp_valid, lp_gen, lp_info, tcred, cr_ret, rx_gen, rx_info, rx_head, rx_cnt, ecred,
            ecr_ret, st, hist, latmax, log_t, log_o, log_src, log_info, log_b, log_n)
    return 0


def _kernel_threads(p, members, gvalid, gdest, gsize, gkind, ready, q_gen, q_info, q_head, q_cnt,
                    ne, done, hdone, ob_gen, ob_info, ob_src, ob_head, ob_cnt, credit, lock, gptr,
                    aptr, sq_dest, sq_size, sq_kind, sq_gen, sq_seq, sq_head, sq_cnt, sq_flit,
                    seq_next, lp_valid, lp_gen, lp_info, tcred, cr_ret, rx_gen, rx_info, rx_head,
                    rx_cnt, ecred, ecr_ret, st, hist, latmax, log_t, log_o, log_src, log_info,
                    log_b, log_n):
    """All batch points on numba threads (``prange``); only without the departure log,
    whose counter is shared."""
    for b in _prange(gdest.shape[0]):
        _point(b, p, members, gvalid, gdest, gsize, gkind, ready, q_gen, q_info, q_head, q_cnt, ne,
            done, hdone, ob_gen, ob_info, ob_src, ob_head, ob_cnt, credit, lock, gptr, aptr,
            sq_dest, sq_size, sq_kind, sq_gen, sq_seq, sq_head, sq_cnt, sq_flit, seq_next,
            lp_valid, lp_gen, lp_info, tcred, cr_ret, rx_gen, rx_info, rx_head, rx_cnt, ecred,
            ecr_ret, st, hist, latmax, log_t, log_o, log_src, log_info, log_b, log_n)
    return 0


_prange = range

if HAVE_NUMBA:
    _jit = dict(cache=True, nogil=True, error_model="numpy")
    _point = numba.njit(**_jit)(_point)
    run_chunk = numba.njit(**_jit)(_kernel)
    _prange = numba.prange
    _threads = None

    def run_chunk_parallel(*args):
        global _threads
        if _threads is None:
            _threads = numba.njit(parallel=True, **_jit)(_kernel_threads)
        return _threads(*args)
else:  # pragma: no cover
    run_chunk = run_chunk_parallel = None
