"""White-box invariants of the ``dl-pair`` harness (:class:`~.dl_pair.DataLinkPairHarness`).

They are assertions, proven with the harness's properties (never assumptions): true in
every reachable state, they exclude the unreachable start states on which a plain
k-induction fails, so the end-to-end properties close by induction. They relate, at
``tl_per_dl`` 1 (one TL flit per DL flit, so sequence number ``n`` carries the ``n``-th
TL flit taken, mod ``2**SEQ_BITS``):

* the sender's fill, the TL offer held and the replay buffer: the entry of every
  sequence number in the window ``[ack_ptr, fill_ptr)`` holds one TL flit, and for the two
  watched sequence numbers ``x`` (``i``, ``j``) its 4 slots and VC are the ``x``-th TL
  flit's;
* every copy of a data flit on its way (the sender's send pipeline, the receiver's
  staging buffer being filled, the flit being checked): its sequence number lies in
  ``[expected - replay_depth, hi_ptr)``, a newer copy is at most ``replay_depth - 1``
  behind an older one, it carries one TL flit and, while ``x`` is in the window, the copy
  of ``x`` carries its data and VC (a copy outside the window may be stale: it was read
  while its entry was refilled, and the receiver drops it as a duplicate);
* the framing: the receiver mid-flit is at the sender's output position of the same
  (not dropped) flit; the staging bank being committed is not refilled until the commit
  has read it;
* the receive side: the TL flits committed (``expected``) minus those delivered equal
  the slots in the commit pipeline and the two receive FIFOs (at most one of them
  non-empty), slot by slot in order, with the watched flits' data and one VC per TL flit.

Ghosts (harness registers, no logic of the design reads them): the slot index, sequence
number and kind of the flit in the sender's output stages B and C, and the forward
handshakes since the last commit.
"""

from __future__ import annotations

from amaranth.hdl import Assert, Cat, Mux, Signal
from amaranth.lib import data

from fusionfabric.formats.chiplet import DL_HEADER, SEQ_BITS, SLOT_BITS
from fusionfabric.rtl.chiplet.common import trailer_layout

__all__ = ["elaborate_fifo", "pair_invariants"]


def _dist(a, b):
    return (a - b)[:SEQ_BITS]


def elaborate_fifo(module, name, platform):
    """Elaborate the FIFO submodule ``name`` of ``module`` in place and return ``(fifo,
    its module)`` (so its storage memory and level registers can be read)."""
    fifo, loc = module._named_submodules[name]
    fm = fifo.elaborate(platform)
    fifo._MustUse__used = True
    module._named_submodules[name] = (fm, loc)
    return fifo, fm


def pair_invariants(m, *, D, txm, ts, rxm, rs, fifos, watched, n_in, n_out, pos,
                    cur_vc, held, held_data, drop_reg, last_ack, hs):
    """Add the invariants to ``m``. ``watched``: ``[(x, data_x, vc_x), ...]``, the watched
    sequence numbers with the data and VC recorded when their TL flit was taken;
    ``fifos``: ``[(fifo, its elaborated module), ...]`` per VC; ``hs``: the forward
    channel's slot handshake."""
    from .flow import driven_signals

    def A(test, name):
        m.d.comb += Assert(test, name)

    def slot(value, q):
        return value.word_select(q, SLOT_BITS)

    ack, fill, hi = ts["ack_ptr"], ts["fill_ptr"], ts["hi_ptr"]
    expected = rs["expected"]
    d_fill = _dist(fill, ack)

    def in_win(s):
        return _dist(s, ack) < d_fill

    # ---------------- counts and pointers ----------------
    A(n_in == fill, "inv_taken_is_fill_ptr")
    A((ts["f_j"] == 0) & (ts["f_vc"] == 0), "inv_fill_position_zero")
    A(_dist(last_ack, ack) <= _dist(expected, ack), "inv_last_ack_in_ack_expected")

    # ---------------- replay buffer and the TL flit being written ----------------
    mem = txm._named_submodules["mem"][0]
    mem_rd = []
    for a in range(D * 4):
        port = mem.read_port(domain="comb")
        m.d.comb += port.addr.eq(a)
        mem_rd.append(port.data)
    nb = 2
    ntl_all, vcb_all = ts["ntl_all"], ts["vcb_all"]
    # the entry of sequence number s is s[0]
    if D != 2:
        raise ValueError(f"the dl-pair invariants are written for replay_depth 2, not {D}")
    for s_off in range(D):
        s = (ack + s_off)[:SEQ_BITS]
        e = s[0]
        A((s_off >= d_fill) | (ntl_all.word_select(e, nb) == 1), "inv_window_entry_one_tl_flit")
    f_k = ts["f_k"]
    fidx = fill[0]
    A((f_k == 0) | (held & (d_fill < D)), "inv_partial_fill_is_held_offer")
    for q in range(3):
        A((f_k <= q) | (Mux(fidx, mem_rd[4 + q], mem_rd[q]) == slot(held_data, q)),
          "inv_partial_fill_slots")
    for x, wd, wv in watched:
        for q in range(4):
            A(~in_win(x) | (Mux(x[0], mem_rd[4 + q], mem_rd[q]) == slot(wd, q)),
              "inv_replay_entry_data")
        A(~in_win(x) | (vcb_all.bit_select(x[0], 1) == wv), "inv_replay_entry_vc")

    # ---------------- the sender's output pipeline (ghosts) ----------------
    adv, cur_on, cur_k = ts["adv"], ts["cur_on"], ts["cur_k"]
    busy, k = ts["busy"], ts["k"]
    b_valid, b_first, b_pad, b_trailer = ts["b_valid"], ts["b_first"], ts["b_pad"], ts["b_trailer"]
    b_hdr = data.View(DL_HEADER.layout(), ts["b_hdr"])
    c_valid, c_first = ts["c_valid"], ts["c_first"]
    c_trailer, c_word = ts["c_trailer"], ts["c_word"]
    c_hdr = data.View(trailer_layout(), c_word).hdr
    rp_tx = [p for p in mem.read_ports if p.domain == "sync"][0].data
    g_bk = Signal(3, name="g_b_k")
    g_ck = Signal(3, name="g_c_k")
    g_cseq = Signal(SEQ_BITS, name="g_c_seq")
    g_cdata = Signal(name="g_c_data")
    g_cntl = Signal(len(b_hdr.n_tl), name="g_c_ntl")
    g_cvc = Signal(len(b_hdr.vc), name="g_c_vc")
    with m.If(adv):
        with m.If(cur_on):
            m.d.sync += g_bk.eq(cur_k)
        m.d.sync += [g_ck.eq(g_bk), g_cseq.eq(b_hdr.seq), g_cdata.eq(b_hdr.data),
                     g_cntl.eq(b_hdr.n_tl), g_cvc.eq(b_hdr.vc)]
    A(~busy | ((k >= 1) & (k <= 4) & b_valid & (g_bk == k - 1) & (b_hdr.seq == ts["s_seq"])
               & (b_hdr.data == ts["s_data"]) & (b_hdr.n_tl == ts["s_ntl"])
               & (b_hdr.vc == ts["s_vcb"])), "inv_stage_a_b")
    A(~b_valid | ((g_bk <= 4) & (b_trailer == (g_bk == 4)) & (b_first == (g_bk == 0))
                  & (b_pad == (~b_hdr.data | (g_bk >= b_hdr.n_tl * 4)))
                  & (busy | (g_bk == 4))), "inv_stage_b")
    A(~c_valid | ((g_ck <= 4) & (c_trailer == (g_ck == 4)) & (c_first == (g_ck == 0))),
      "inv_stage_c")
    A(~(c_valid & b_valid) | ((g_ck == 4) & (g_bk == 0))
      | ((g_bk == g_ck + 1) & (g_cseq == b_hdr.seq) & (g_cdata == b_hdr.data)
         & (g_cntl == b_hdr.n_tl) & (g_cvc == b_hdr.vc)), "inv_stage_b_c_same_flit")
    A(~(b_valid & ~c_valid) | (g_bk == 0), "inv_stage_b_first_after_gap")
    A(~(c_valid & ~b_valid) | (g_ck == 4), "inv_stage_c_last_before_gap")
    A(~(c_valid & (g_ck == 4)) | ((c_hdr.seq == g_cseq) & (c_hdr.data == g_cdata)
                                  & (c_hdr.n_tl == g_cntl) & (c_hdr.vc == g_cvc)),
      "inv_stage_c_trailer")
    A(~(c_valid & (g_ck < 4) & (~g_cdata | (g_ck >= g_cntl * 4))) | (c_word == 0),
      "inv_stage_c_pad")

    # ---------------- receiver framing, staging buffer, check, commit ----------------
    r_in, r_k, r_bank = rs["r_in"], rs["r_k"], rs["r_bank"]
    chk, chk_bank = rs["chk"], rs["chk_bank"]
    hdr_reg = data.View(DL_HEADER.layout(), rs["hdr_reg"])
    c_busy, c_k, c_last, c_bank, c_vcb = (rs["c_busy"], rs["c_k"], rs["c_last"], rs["c_bank"],
                                          rs["c_vcb"])
    p_valid, p_vc = rs["p_valid"], rs["p_vc"]
    commit = rs["commit"]
    stage = rxm._named_submodules["stage"][0]
    rp_rx = [p for p in stage.read_ports if p.domain == "sync"][0].data
    st_rd = []
    for a in range(8):
        port = stage.read_port(domain="comb")
        m.d.comb += port.addr.eq(a)
        st_rd.append(port.data)

    def st(bank, q):
        return Mux(bank, st_rd[4 + q], st_rd[q])

    A((rs["r_err"] == 0) & (rs["chk_err"] == 0), "inv_no_err_words")
    A(~r_in | (c_valid & (g_ck == r_k) & (r_k >= 1) & (r_k <= 4) & ~drop_reg),
      "inv_receiver_at_sender_position")
    A(~chk | (~r_in & (chk_bank == r_bank) & (~c_valid | (g_ck == 0))),
      "inv_check_after_trailer")
    A(~c_busy | (~chk & (c_last == 3) & (c_k <= 3)), "inv_commit_pipeline")
    A(~(p_valid & c_busy) | (c_k >= 1), "inv_commit_read_after_first")
    A(~(c_busy & (c_k >= 1)) | (p_valid & (p_vc == c_vcb)), "inv_commit_read_valid")
    # forward handshakes since the last commit: the next flit's slots
    g_hs = Signal(3, name="g_hs")
    with m.If(commit):
        m.d.sync += g_hs.eq(hs)
    with m.Elif(hs & (g_hs != 7)):
        m.d.sync += g_hs.eq(g_hs + 1)
    A(~c_busy | ((g_hs <= c_k + 1)
                 & Mux(g_hs == 0, ~c_valid | (g_ck == 0), c_valid & (g_ck == g_hs))
                 & ((r_bank == c_bank) | (g_hs != 0)) & (~r_in | (r_bank != c_bank))),
      "inv_commit_bank_not_refilled")

    # the sequence number of every copy on its way; a newer copy is at most D - 1 behind
    # an older one
    copies = [  # (present and a data flit, seq, n_tl)
        (b_valid & b_hdr.data, b_hdr.seq, b_hdr.n_tl, b_hdr.vc),
        (c_valid & g_cdata, g_cseq, g_cntl, g_cvc),
        (chk & hdr_reg.data, hdr_reg.seq, hdr_reg.n_tl, hdr_reg.vc),
    ]
    d_hi_e = _dist(hi, expected)
    for n, (v, s, ntl, vc) in enumerate(copies):
        behind = (_dist(expected, s) != 0) & (_dist(expected, s) <= D)
        ahead = _dist(s, expected) < d_hi_e
        A(~v | ((behind | ahead) & (ntl == 1)), f"inv_copy_seq_{'bcx'[n]}")

    def newer_ok(sa, sb):       # b newer than a
        return (_dist(sa, sb) < D) | (_dist(sb, sa) < 2 * D)
    (bv, bs, _, _), (cv, cs, _, _), (xv, xs, _, _) = copies
    A(~(bv & cv & c_valid & (g_ck == 4)) | newer_ok(cs, bs), "inv_copy_order_c_b")
    A(~(xv & cv) | newer_ok(xs, cs), "inv_copy_order_chk_c")
    A(~(xv & bv) | newer_ok(xs, bs), "inv_copy_order_chk_b")

    for x, wd, wv in watched:
        win = in_win(x)
        # stage B: the slot read from the replay buffer
        A(~(b_valid & b_hdr.data & (b_hdr.seq == x) & win) | (b_hdr.vc == wv), "inv_copy_vc_b")
        A(~(b_valid & b_hdr.data & (b_hdr.seq == x) & win & (g_bk < 4))
          | (rp_tx == wd.word_select(g_bk[:2], SLOT_BITS)), "inv_copy_data_b")
        A(~(c_valid & g_cdata & (g_cseq == x) & win) | (g_cvc == wv), "inv_copy_vc_c")
        A(~(c_valid & g_cdata & (g_cseq == x) & win & (g_ck < 4))
          | (c_word == wd.word_select(g_ck[:2], SLOT_BITS)), "inv_copy_data_c")
        for q in range(4):
            A(~(r_in & g_cdata & (g_cseq == x) & win & (r_k > q)) | (st(r_bank, q) == slot(wd, q)),
              "inv_copy_data_staging")
            A(~(chk & hdr_reg.data & (hdr_reg.seq == x) & win)
              | (st(chk_bank, q) == slot(wd, q)), "inv_copy_data_check")
        A(~(chk & hdr_reg.data & (hdr_reg.seq == x) & win) | (hdr_reg.vc == wv),
          "inv_copy_vc_check")
        # committed: the commit pipeline holds TL flit expected - 1
        A(~(c_busy & (_dist(expected, x) == 1)) | (c_vcb == wv), "inv_commit_vc")
        for q in range(4):
            A(~(c_busy & (_dist(expected, x) == 1) & (c_k <= q)) | (st(c_bank, q) == slot(wd, q)),
              "inv_commit_data")

    # ---------------- the receive FIFOs and the delivered count ----------------
    lv = []
    outs = []
    for v, (q, fm) in enumerate(fifos):
        fs = driven_signals(fm)
        inner, produce, consume = fs["inner_level"], fs["produce"], fs["consume"]
        storage = fm._named_submodules["storage"][0]
        port = storage.read_port(domain="comb")
        m.d.comb += port.addr.eq(consume)
        A((inner <= 1) & (produce < 3) & (consume < 3)
          & (produce == Mux(consume + inner >= 3, consume + inner - 3, consume + inner)),
          f"inv_fifo{v}_pointers")
        lv.append(inner + q.r_rdy)
        outs.append((q, inner, port.data))
    A((lv[0] == 0) | (lv[1] == 0), "inv_one_fifo_busy")
    delv = Cat(pos, n_out)                          # slots delivered (mod 2**(SEQ_BITS+2))
    W = SEQ_BITS + 2
    c_rem = Mux(c_busy, 4 - c_k, 0)
    A((Cat(Signal(2), expected) - delv)[:W] == c_rem + p_valid + lv[0] + lv[1],
      "inv_committed_is_delivered_or_pending")
    n_p = (delv + lv[0] + lv[1])[:W]
    # a TL flit's first slot is read two cycles after the last one of the one before
    A(~(p_valid & (n_p[:2] == 0)) | ((outs[0][1] == 0) & (outs[1][1] == 0)),
      "inv_first_read_after_gap")
    for v, (q, inner, sdata) in enumerate(outs):
        n_fi = (delv + q.r_rdy)[:W]
        A(~((pos != 0) & (lv[v] != 0)) | (cur_vc == v), f"inv_fifo{v}_current_vc")
        A(~((lv[v] != 0) & p_valid & (n_p[:2] != 0)) | (p_vc == v), f"inv_fifo{v}_then_read")
        for x, wd, wv in watched:
            A(~(q.r_rdy & (n_out == x))
              | ((q.r_data == wd.word_select(pos, SLOT_BITS)) & (wv == v)),
              f"inv_fifo{v}_out_data")
            A(~((inner == 1) & (n_fi[2:] == x))
              | ((sdata == wd.word_select(n_fi[:2], SLOT_BITS)) & (wv == v)),
              f"inv_fifo{v}_inner_data")
    A(~((pos != 0) & (lv[0] == 0) & (lv[1] == 0) & p_valid) | (p_vc == cur_vc),
      "inv_read_current_vc")
    A(~((pos != 0) & (lv[0] == 0) & (lv[1] == 0) & ~p_valid & c_busy) | (c_vcb == cur_vc),
      "inv_commit_current_vc")
    for x, wd, wv in watched:
        A(~(p_valid & (n_p[2:] == x)) | ((rp_rx == wd.word_select(n_p[:2], SLOT_BITS))
                                         & (p_vc == wv)), "inv_read_data")
        A(~((pos != 0) & (n_out == x)) | (cur_vc == wv), "inv_current_vc")
