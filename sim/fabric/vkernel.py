"""The cycle kernel in numpy, vectorized over (batch point, port): the fallback without numba.

Same arguments, same state and the same rules, in the same order, as
:func:`fusionfabric.sim.fabric.kernel._kernel` (read its docstring for the order of evaluation); one
Python iteration per cycle, every step a handful of array operations over ``batch x
n_ports`` (the allocator over ``batch x n_ports x n_ports``). The two kernels must agree
bit for bit; tests/test_model_engine.py runs both on the same traffic.
"""

from __future__ import annotations

import numpy as np

from .kernel import P, S

__all__ = ["run_chunk_numpy"]

_DIST_CACHE: dict[int, np.ndarray] = {}


def _dist(n):
    """``DIST[p, x] = (x - p) mod n``: the round-robin distance of item x from pointer p."""
    d = _DIST_CACHE.get(n)
    if d is None:
        a = np.arange(n)
        d = ((a[None, :] - a[:, None]) % n).astype(np.int16)
        _DIST_CACHE[n] = d
    return d


def _field(info, off, width):
    return (info >> off) & ((1 << width) - 1)


def run_chunk_numpy(p, members, gvalid,
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
    g = {k: int(p[v]) for k, v in P.items()}
    N, FIFO, CAP, ITERS, OD = g["N"], g["FIFO"], g["CAP"], g["ITERS"], g["OUT_DEPTH"]
    L, FRAME, K, SQ, H = g["L"], g["FRAME"], g["K"], g["SQ"], g["H"]
    W0, W1, LOG, T0, C, USE_READY, G = (g["W0"], g["W1"], g["LOG"], g["T0"], g["C"],
                                        g["USE_READY"], g["G"])
    B = gdest.shape[0]
    LP, CR, ER = L + 1, L + 2, 2 * L + 2
    DIST = _dist(N)
    arN = np.arange(N)
    msize = members.sum(axis=1)                              # members per group
    mcount = np.where(gvalid, msize, 0)
    logcap = log_t.shape[0]
    for c in range(C):
        t = T0 + c
        in_window = W0 <= t < W1
        framing = FRAME > 0 and t % FRAME == FRAME - 1

        # ---- 1. traffic -------------------------------------------------------------
        sz = gsize[:, c, :]
        new = sz > 0
        if new.any():
            d = gdest[:, c, :]
            kd = gkind[:, c, :]
            if in_window:
                dg = np.clip(d, 0, G - 1)
                copies = np.where(kd == 1, np.where(d < G, mcount[dg], 0), 1)
                st[:, :, S["gen_flits"]] += np.where(new, sz, 0)
                st[:, :, S["gen_pkts"]] += new
                st[:, :, S["exp_deliv"]] += np.where(new, copies, 0)
            full = new & (sq_cnt >= SQ)
            st[:, :, S["src_drop_pkts"]] += full
            st[:, :, S["src_drop_flits"]] += np.where(full, sz, 0)
            bb, ii = np.nonzero(new & ~full)
            slot = (sq_head[bb, ii] + sq_cnt[bb, ii]) % SQ
            sq_dest[bb, ii, slot] = d[bb, ii]
            sq_size[bb, ii, slot] = sz[bb, ii]
            sq_kind[bb, ii, slot] = kd[bb, ii]
            sq_gen[bb, ii, slot] = t
            sq_seq[bb, ii, slot] = seq_next[bb, ii]
            seq_next[bb, ii] += 1
            sq_cnt[bb, ii] += 1

        # ---- 2. link, sender side -------------------------------------------------------
        r = t % CR
        tcred += cr_ret[:, :, r]
        cr_ret[:, :, r] = 0
        if not framing:
            bb, ii = np.nonzero((sq_cnt > 0) & (tcred > 0))
            if bb.size:
                h = sq_head[bb, ii]
                fl = sq_flit[bb, ii]
                szh = sq_size[bb, ii, h]
                first = (fl == 0).astype(np.int64)
                last = (fl == szh - 1).astype(np.int64)
                info = ((sq_seq[bb, ii, h] & 0xFFFFFFFF) | ((fl & 0xFFF) << 32)
                        | (first << 44) | (last << 45) | ((sq_kind[bb, ii, h] & 3) << 46)
                        | ((sq_dest[bb, ii, h] & 0xFF) << 48))
                s = (t + L) % LP
                lp_valid[bb, ii, s] = True
                lp_gen[bb, ii, s] = sq_gen[bb, ii, h]
                lp_info[bb, ii, s] = info
                tcred[bb, ii] -= 1
                if in_window:
                    st[bb, ii, S["inj_flits"]] += 1
                lm = last == 1
                sq_flit[bb, ii] = np.where(lm, 0, fl + 1)
                sq_head[bb[lm], ii[lm]] = (h[lm] + 1) % SQ
                sq_cnt[bb[lm], ii[lm]] -= 1
        s = t % LP
        bb, ii = np.nonzero(lp_valid[:, :, s])
        if bb.size:
            lp_valid[bb, ii, s] = False
            w = (rx_head[bb, ii] + rx_cnt[bb, ii]) % K
            rx_gen[bb, ii, w] = lp_gen[bb, ii, s]
            rx_info[bb, ii, w] = lp_info[bb, ii, s]
            rx_cnt[bb, ii] += 1

        # ---- 3. output stage --------------------------------------------------------------
        r = t % ER
        ecred += ecr_ret[:, :, r]
        ecr_ret[:, :, r] = 0
        have = ob_cnt > 0
        rdy = (ecred > 0) & (not framing)
        if USE_READY:
            rdy = rdy & ready[:, c, :]
        st[:, :, S["out_stalls"]] += have & ~rdy
        hs = have & rdy
        cred_inc = hs.astype(np.int64)
        bb, oo = np.nonzero(hs)
        if bb.size:
            h = ob_head[bb, oo]
            gen = ob_gen[bb, oo, h]
            info = ob_info[bb, oo, h]
            src = ob_src[bb, oo, h]
            ob_head[bb, oo] = (h + 1) % OD
            ob_cnt[bb, oo] -= 1
            st[bb, oo, S["flits_out"]] += 1
            ecred[bb, oo] -= 1
            ecr_ret[bb, oo, (t + 2 * L + 1) % ER] += 1
            td = t + L
            if W0 <= td < W1:
                st[bb, oo, S["acc_flits"]] += 1
            lat_m = (_field(info, 45, 1) == 1) & (gen >= W0) & (gen < W1)
            if lat_m.any():
                b2, o2 = bb[lat_m], oo[lat_m]
                lat = td - gen[lat_m]
                np.add.at(st, (b2, o2, S["lat_sum"]), lat)
                np.add.at(st, (b2, o2, S["lat_cnt"]), 1)
                np.add.at(hist, (b2, np.minimum(lat, H - 1)), 1)
                np.maximum.at(latmax, b2, lat)
            if LOG:
                k = int(log_n[0])
                m = bb.size
                if k + m <= logcap:
                    log_t[k:k + m] = t
                    log_o[k:k + m] = oo
                    log_src[k:k + m] = src
                    log_info[k:k + m] = info
                    log_b[k:k + m] = bb
                log_n[0] = k + m

        # ---- 4. allocator -------------------------------------------------------------------
        popped = np.full((B, N), -1, np.int64)
        if FIFO:
            nonempty = q_cnt[:, :, 0] > 0
            hinfo = np.take_along_axis(q_info[:, :, 0, :], q_head[:, :, 0:1], axis=2)[:, :, 0]
            hkind = _field(hinfo, 46, 2)
            hdest = _field(hinfo, 48, 8)
            # T[b, i, o]: the head's remaining targets
            T = np.where((hkind == 0)[:, :, None], hdest[:, :, None] == arN[None, None, :],
                         members[np.clip(hdest, 0, G - 1)] & ~hdone)
            R = (T & nonempty[:, :, None]).transpose(0, 2, 1)      # [b, o, i]
        else:
            R = (q_cnt > 0).transpose(0, 2, 1)                     # [b, o, i]
        R = R & (credit > 0)[:, :, None]
        lk = lock >= 0
        R = R & (~lk[:, :, None] | (lock[:, :, None] == arN[None, None, :]))
        free_in = np.ones((B, N), bool)
        free_out = np.ones((B, N), bool)
        match_in = np.full((B, N), -1, np.int64)
        for rnd in range(ITERS):
            Rk = R & free_in[:, None, :] & free_out[:, :, None]
            key = np.where(Rk, DIST[gptr], N)                      # [b, o, i]
            gi = key.argmin(axis=2)
            has = key.min(axis=2) < N                              # [b, o]
            if not has.any():
                break
            Gm = (gi[:, None, :] == arN[None, :, None]) & has[:, None, :]   # [b, i, o]
            key2 = np.where(Gm, DIST[aptr], N)
            aj = key2.argmin(axis=2)
            acc = key2.min(axis=2) < N                             # [b, i]
            bb, ii = np.nonzero(acc)
            oo = aj[bb, ii]
            match_in[bb, ii] = oo
            free_in[bb, ii] = False
            free_out[bb, oo] = False
            if rnd == 0:
                aptr[bb, ii] = (oo + 1) % N
                gptr[bb, oo] = (ii + 1) % N
        bb, ii = np.nonzero(match_in >= 0)
        if bb.size:
            oo = match_in[bb, ii]
            q = np.zeros_like(oo) if FIFO else oo
            h = q_head[bb, ii, q]
            gen = q_gen[bb, ii, q, h]
            info = q_info[bb, ii, q, h]
            w = (ob_head[bb, oo] + ob_cnt[bb, oo]) % OD
            ob_gen[bb, oo, w] = gen
            ob_info[bb, oo, w] = info
            ob_src[bb, oo, w] = ii
            ob_cnt[bb, oo] += 1
            credit[bb, oo] -= 1
            uni = _field(info, 46, 2) == 0
            lock[bb[uni], oo[uni]] = np.where(_field(info[uni], 45, 1) == 1, -1, ii[uni])
            pop = np.ones(bb.size, bool)
            if FIFO:
                mc = hkind[bb, ii] != 0
                if mc.any():
                    hdone[bb[mc], ii[mc], oo[mc]] = True
                    rem = members[hdest[bb[mc], ii[mc]]] & ~hdone[bb[mc], ii[mc]]
                    fin = ~rem.any(axis=1)
                    pop[mc] = fin
                    hdone[bb[mc][fin], ii[mc][fin], :] = False
            bp, ip, qp = bb[pop], ii[pop], q[pop]
            q_head[bp, ip, qp] = (h[pop] + 1) % CAP
            q_cnt[bp, ip, qp] -= 1
            popped[bp, ip] = qp

        # ---- 5. ingress ----------------------------------------------------------------------
        bb, ii = np.nonzero(rx_cnt > 0)
        if bb.size:
            h = rx_head[bb, ii]
            info = rx_info[bb, ii, h]
            gen = rx_gen[bb, ii, h]
            kd = _field(info, 46, 2)
            d = _field(info, 48, 8)
            dg = np.clip(d, 0, G - 1)
            drop_dest = (kd == 0) & (d >= N)
            drop_group = (kd == 1) & ((d >= G) | ~gvalid[dg] | (msize[dg] == 0))
            drop_kind = kd >= 2
            np.add.at(st, (bb, ii, S["drop_dest"]), drop_dest)
            np.add.at(st, (bb, ii, S["drop_group"]), drop_group)
            np.add.at(st, (bb, ii, S["drop_kind"]), drop_kind)
            drop = drop_dest | drop_group | drop_kind
            rdy = drop.copy()
            ok = ~drop
            if FIFO:
                target = np.zeros_like(d)
                lastcopy = np.ones(bb.size, bool)
            else:
                rem = np.where((kd == 1)[:, None], members[dg] & ~done[bb, ii],
                               d[:, None] == arN[None, :])
                target = rem.argmax(axis=1)
                lastcopy = rem.sum(axis=1) <= 1
            cnt0 = q_cnt[bb, ii, target] + (popped[bb, ii] == target)
            wr = ok & (cnt0 < CAP)
            if wr.any():
                b2, i2, t2 = bb[wr], ii[wr], target[wr]
                w = (q_head[b2, i2, t2] + q_cnt[b2, i2, t2]) % CAP
                q_gen[b2, i2, t2, w] = gen[wr]
                q_info[b2, i2, t2, w] = info[wr]
                q_cnt[b2, i2, t2] += 1
                if not FIFO:
                    lc = lastcopy[wr]
                    mcl = lc & (kd[wr] != 0)
                    done[b2[mcl], i2[mcl], :] = False
                    done[b2[~lc], i2[~lc], t2[~lc]] = True
                rdy[wr] = lastcopy[wr]
            st[bb, ii, S["flits_in"]] += rdy & ok
            st[bb, ii, S["in_stalls"]] += ~rdy
            b2, i2 = bb[rdy], ii[rdy]
            rx_head[b2, i2] = (h[rdy] + 1) % K
            rx_cnt[b2, i2] -= 1
            cr_ret[b2, i2, (t + L + 1) % CR] += 1

        # ---- 6. credits -------------------------------------------------------------------
        credit += cred_inc
    # keep the numba kernel's VOQ occupancy bits consistent (unused here)
    if not FIFO:
        ne[...] = 0
        bb, ii, oo = np.nonzero(q_cnt > 0)
        np.bitwise_or.at(ne, (bb, oo, ii >> 6), (np.uint64(1) << (ii & 63).astype(np.uint64)))
    return 0
