"""Multi-lane 64b/66b PCS receiver: block lock, marker lock, reorder, deskew, descramble,
decode (IEEE 802.3 cl. 49 and 82)."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, EnableInserter, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.pcs import (AM_BAD_LIMIT, KNOWN_TYPES, MARKERS_100G, SYNC_CTRL,
                                      SYNC_DATA, WORD, BlockType, check_params, check_serdes_width)
from fusionfabric.rtl.hdl import eq

from .common import ID_BITS, bip8, descramble64, marker_id
from .gearbox import RxGearbox
from .lock import BlockLock

__all__ = ["PcsRx"]

HUNT, CHECK, LOCKED = 0, 1, 2
A_WAIT, A_ARM, A_RUN = 0, 1, 2


class PcsRx(wiring.Component):
    """Receive ``n_lanes`` raw PCS lanes and deliver the client word stream.

    Per physical lane: :class:`BlockLock` (bit slip hunting, Figure 49-12 lock, BER
    monitor), then marker lock (cl. 82.2.18.3 semantics): the first marker of Table 82-2
    seen sets the lane id, the marker ``am_period`` blocks later with the same id gives
    ``am_lock``; 4 consecutive bad markers at the expected position lose it. BIP3 is checked
    at every expected marker position (one count per mismatching BIP3). When every lane has
    marker lock and the ids are a permutation of ``0..n_lanes-1``, the next marker of each
    lane starts a per-lane delay line (``max_skew + 1`` blocks); once all lanes have seen
    it, each lane reads its line at its own delay, so the rows line up (deskew) and lane
    ``id`` is put in logical position ``id`` (reorder). Marker rows are checked (all lanes a
    marker of their id, else realign, one cycle later: the row after a bad marker row is
    not delivered) and dropped; data rows are descrambled in stream order
    and decoded. The first data row after (re)alignment only primes the descrambler.
    Bit-exact and cycle-exact with :class:`fusionfabric.sim.pcs.Receiver`.

    Parameters
    ----------
    n_lanes : int
        PCS lanes, 1..20.
    am_period : int
        Rows per marker period (as the transmitter); ``>= 2*max_skew + 3``.
    max_skew : int
        Largest arrival difference between lanes, in cycles (blocks), that deskew absorbs.
        A sub-block bit offset of a lane may add one cycle to the block skew.
    ber_window : int
        BER monitor window in blocks (see :class:`BlockLock`).
    serdes_width : int
        Bits per lane per cycle on ``i_lanes``: 66, or 32/64 through a
        :class:`~rtl.pcs.gearbox.RxGearbox` whose unaligned 66-bit chunks feed the 66-bit
        receiver (block lock's bit slip, marker lock, deskew, ...) as a clock enable: every
        count in blocks (``max_skew``, ``ber_window``, ``am_period``) stays in blocks.
        Bit-exact and cycle-exact with :class:`fusionfabric.sim.pcs.GearboxReceiver`.

    Members
    -------
    i_lanes : In(serdes_width).array(n_lanes)
        Raw, unaligned W bits per lane per cycle, bit 0 first on the wire.
    o_data : Out(Signature(payload=ArrayLayout(WORD, n_lanes), valid=1))
        An always-ready stream (no ``ready``: the line cannot be stalled). Rows of ``n_lanes`` words in stream order. A block with a bad sync header or an
        unknown control type is delivered as an ERROR control word and counted.
    o_link_up : Out(1)
        All lanes locked and aligned (rows flow).
    o_block_lock, o_am_lock, o_hi_ber : Out(n_lanes)
        Per physical lane status.
    o_lane_id : Out(5).array(n_lanes)
        Logical lane id found in each physical lane's markers.
    o_bip_errors, o_slips : Out(16).array(n_lanes)
        Per physical lane BIP3 mismatches and bit slips (saturating).
    o_decode_errors, o_align_failures : Out(16)
        Blocks delivered as ERROR (counted in the cycle after their row is on ``o_data``);
        alignment attempts abandoned (skew too large, or a marker row that did not line up).

    Timing
    ------
    A row whose blocks have all arrived at cycle ``t`` (lane with the largest delay) is on
    ``o_data`` at cycle ``t + 4``: block register (1), delay line (1, plus the lane's
    deskew delay, up to ``max_skew``), the row register after the reorder (1) and the
    output register (1) after the descrambler and decoder. Throughput: one row per cycle
    except marker rows.
    Acquisition from reset on clean lanes: 64 blocks to block lock, then marker lock at the
    second marker (up to ``2*am_period`` blocks), then alignment at the next marker and one
    priming row. Reset: all lanes hunting, link down; recovery from a slip or a lost lane
    needs no reset (the lane relocks, the link realigns).

    With a gearbox (W = 32/64) the receiver above runs in the cycles after the gearbox
    loaded a chunk (W/66 of the cycles; the gearbox adds one register), and ``o_data.valid``
    is high only in the cycle right after such an edge, so each row is delivered once.
    Counts in blocks become ``66/W`` times as many cycles.
    """

    def __init__(self, n_lanes: int = 4, am_period: int = 16384, max_skew: int = 8,
                 ber_window: int = 19531, serdes_width: int = 66):
        check_params(n_lanes, am_period, max_skew, ber_window)
        check_serdes_width(serdes_width)
        self.serdes_width = serdes_width
        self.n_lanes = n_lanes
        self.am_period = am_period
        self.max_skew = max_skew
        self.ber_window = ber_window
        super().__init__({
            "i_lanes": In(serdes_width).array(n_lanes),
            # an always-ready stream (a line cannot be stalled), spelled out because a
            # Const ready cannot be a top-level port
            "o_data": Out(wiring.Signature({
                "payload": Out(data.ArrayLayout(WORD.layout(), n_lanes)),
                "valid": Out(1)})),
            "o_link_up": Out(1),
            "o_block_lock": Out(n_lanes),
            "o_am_lock": Out(n_lanes),
            "o_hi_ber": Out(n_lanes),
            "o_lane_id": Out(ID_BITS).array(n_lanes),
            "o_bip_errors": Out(16).array(n_lanes),
            "o_slips": Out(16).array(n_lanes),
            "o_decode_errors": Out(16),
            "o_align_failures": Out(16),
        })

    def elaborate(self, platform):
        if self.serdes_width != 66:
            return self._elaborate_gearbox()
        m = Module()
        n, P, S = self.n_lanes, self.am_period, self.max_skew
        am_state, am_lock, am_cnt, am_id, bufs, marker_now = [], [], [], [], [], []
        mflags, blocks = [], []
        for p in range(n):
            bl = BlockLock(self.ber_window)
            m.submodules[f"lock{p}"] = bl
            m.d.comb += [
                bl.i_chunk.eq(self.i_lanes[p]),
                self.o_block_lock[p].eq(bl.o_lock),
                self.o_hi_ber[p].eq(bl.o_hi_ber),
                self.o_slips[p].eq(bl.o_slips),
            ]
            b = bl.o_block
            mk, mid = marker_id(m, b, f"b1_{p}")
            st = Signal(2, name=f"am_state{p}")
            lk = Signal(name=f"am_lock{p}")
            cnt = Signal(range(P), name=f"am_cnt{p}")
            lid = Signal(ID_BITS, name=f"am_id{p}")
            bad = Signal(range(AM_BAD_LIMIT), name=f"am_bad{p}")
            acc = Signal(8, name=f"bip_acc{p}")
            berr = self.o_bip_errors[p]
            cnt_next = Mux(cnt == P - 1, 0, cnt + 1)
            # "b is the marker of lane lid": a compare with the expected value (a table
            # lookup by the lid register, off the path) instead of recognising the marker
            # and comparing ids; the same function, since the table values differ
            # (a chain of Muxes, not an Array: an Array index is a Verilog ``always @*``
            # case, which Icarus does not evaluate at time 0, so a lane id that never
            # leaves its reset value 0 left the expected value X in simulation)
            table = Const(0, 24)
            for k, (m0, m1, m2) in reversed(list(enumerate(MARKERS_100G))):
                table = Mux(eq(lid, k), Const(m0 | m1 << 8 | m2 << 16, 24), table)
            exp = Signal(24, name=f"marker_expect{p}")
            m.d.comb += exp.eq(table)
            own = Signal(name=f"own_marker{p}")
            m.d.comb += own.eq((b[0:2] == SYNC_CTRL) & (b[34:58] == ~b[2:26]) & (b[2:26] == exp))
            with m.If(~bl.o_ok):
                m.d.sync += [st.eq(HUNT), lk.eq(0), bad.eq(0)]
            with m.Elif(eq(st, HUNT)):
                with m.If(mk):
                    m.d.sync += [st.eq(CHECK), lid.eq(mid), cnt.eq(1 % P), acc.eq(bip8(b))]
            with m.Else():
                with m.If(eq(cnt, 0)):
                    with m.If(((st == LOCKED) | own) & (b[26:34] != acc) & (berr != 0xFFFF)):
                        m.d.sync += berr.eq(berr + 1)
                    m.d.sync += acc.eq(bip8(b))
                    with m.If(st == CHECK):
                        with m.If(own):
                            m.d.sync += [st.eq(LOCKED), lk.eq(1), bad.eq(0)]
                        with m.Else():
                            m.d.sync += st.eq(HUNT)
                    with m.Else():
                        with m.If(own):
                            m.d.sync += bad.eq(0)
                        with m.Elif(bad == AM_BAD_LIMIT - 1):
                            m.d.sync += [st.eq(HUNT), lk.eq(0), bad.eq(0)]
                        with m.Else():
                            m.d.sync += bad.eq(bad + 1)
                with m.Else():
                    m.d.sync += acc.eq(acc ^ bip8(b))
                m.d.sync += cnt.eq(cnt_next)
            buf = [Signal(66, name=f"dl{p}_{i}") for i in range(S + 1)]
            m.d.sync += buf[0].eq(b)
            for i in range(1, S + 1):
                m.d.sync += buf[i].eq(buf[i - 1])
            # beside each block in the delay line: "a marker of lane am_id", tested as the
            # block enters (timing: keeps the marker test off the path from the line's read
            # to the alignment check). am_id is constant while all lanes keep marker lock,
            # and a deskewed row is checked only then, on blocks that entered meanwhile, so
            # the flag equals the test made on the deskewed block.
            flag = [Signal(name=f"dlm{p}_{i}") for i in range(S + 1)]
            m.d.sync += flag[0].eq(own)
            for i in range(1, S + 1):
                m.d.sync += flag[i].eq(flag[i - 1])
            mflags.append(flag)
            blocks.append(b)
            m.d.comb += [self.o_am_lock[p].eq(lk), self.o_lane_id[p].eq(lid)]
            am_state.append(st)
            am_lock.append(lk)
            am_cnt.append(cnt)
            am_id.append(lid)
            bufs.append(buf)
            marker_now.append((st == LOCKED) & eq(cnt, 0))

        # -- alignment (deskew + reorder) --
        align = Signal(2)
        perm_ok = Cat(*[Cat(*[eq(am_id[p], j) for p in range(n)]).any() for j in range(n)]).all()
        all_ok = Signal()
        m.d.comb += [all_ok.eq(Cat(*am_lock).all() & perm_ok), self.o_link_up.eq(align == A_RUN)]
        started = Signal(n)
        dcnt = [Signal(range(S + 2), name=f"dcnt{p}") for p in range(n)]
        delay = [Signal(range(S + 1), name=f"delay{p}") for p in range(n)]
        row_cnt = Signal(range(P))
        primed = Signal()
        hist = Signal(58)
        m.d.sync += self.o_data.valid.eq(0)
        chk_ok = Signal()     # the last marker row lined up (registered check)
        chk_due = Signal()    # ... and it was in the previous cycle
        m.d.sync += chk_due.eq(0)

        started_next = Cat(*[started[p] | marker_now[p] for p in range(n)])
        dcnt_next = [Mux(started[p], dcnt[p] + 1, 0) for p in range(n)]
        abort = Cat(*[started[p] & (dcnt[p] + 1 > S) for p in range(n)]).any()

        # the deskewed rows, read a cycle early into a register (timing: the line's read
        # and the reorder in different cycles): the line shifts every cycle, so tap d - 1
        # (the entering block for d = 0) now is tap d in the next cycle. That holds while
        # the delays stay put; they are set at the edge into A_RUN, whose first cycle is a
        # marker row, which is checked by its flags (read at the current delays) and not
        # delivered, so the rows are used only from the second cycle on.
        row_sig = [Signal(66, name=f"row{p}") for p in range(n)]
        m.d.sync += [row_sig[p].eq(Array([blocks[p]] + bufs[p][:S])[delay[p]])
                     for p in range(n)]
        row_ok = [Array(mflags[p])[delay[p]] for p in range(n)]
        logical = []
        for j in range(n):
            sel = Signal(66, name=f"logical{j}")
            expr = Const(0, 66)
            for p in range(n):
                expr = expr | Mux(eq(am_id[p], j), row_sig[p], 0)
            m.d.comb += sel.eq(expr)
            logical.append(sel)
        # row register between the reorder and the descrambler (timing: splits the path
        # delay line -> reorder -> descrambler -> decoder)
        s_valid = Signal()
        s_first = Signal()
        s_logical = [Signal(66, name=f"s_logical{j}") for j in range(n)]
        m.d.sync += s_valid.eq(0)
        desc_sig = Signal(64 * n)
        h = hist
        for j in range(n):   # one 64-bit descrambler step per lane, in stream order
            out, h_next = descramble64(h, s_logical[j][2:66])
            h = Signal(58, name=f"desc_state{j}")
            m.d.comb += [desc_sig[64 * j:64 * j + 64].eq(out), h.eq(h_next)]
        hist_next = h
        errs = []
        words = []
        for j in range(n):
            sync = s_logical[j][0:2]
            pay = desc_sig[64 * j:64 * j + 64]
            known = Cat(*[pay[0:8] == t for t in KNOWN_TYPES]).any()
            err = Signal(name=f"err{j}")
            m.d.comb += err.eq(~((sync == SYNC_DATA) | ((sync == SYNC_CTRL) & known)))
            errs.append(err)
            words.append((Mux(err, int(BlockType.ERROR), pay), Mux(err, 1, sync == SYNC_CTRL)))
        # the ERROR blocks of the row on o_data, counted into o_decode_errors in the next
        # cycle (timing: keeps the count's adder and saturation out of the descramble ->
        # decode path)
        dec_row = Signal(n, name="dec_row")
        dec_total = Signal(17, name="dec_total")
        m.d.comb += dec_total.eq(self.o_decode_errors + sum(dec_row[j] for j in range(n)))
        m.d.sync += [self.o_decode_errors.eq(Mux(dec_total[16], 0xFFFF, dec_total[:16])),
                     dec_row.eq(0)]

        with m.If(~all_ok):
            m.d.sync += [align.eq(A_WAIT), primed.eq(0)]
        with m.Elif(eq(align, A_WAIT)):
            m.d.sync += [align.eq(A_ARM), started.eq(0)]
            m.d.sync += [dcnt[p].eq(0) for p in range(n)]
        with m.Elif(align == A_ARM):
            m.d.sync += started.eq(started_next)
            m.d.sync += [dcnt[p].eq(dcnt_next[p]) for p in range(n)]
            with m.If(abort):
                m.d.sync += align.eq(A_WAIT)
                with m.If(self.o_align_failures != 0xFFFF):
                    m.d.sync += self.o_align_failures.eq(self.o_align_failures + 1)
            with m.Elif(started_next.all()):
                m.d.sync += [align.eq(A_RUN), row_cnt.eq(0), primed.eq(0)]
                m.d.sync += [delay[p].eq(dcnt_next[p]) for p in range(n)]
        with m.Else():
            m.d.sync += row_cnt.eq(Mux(row_cnt == P - 1, 0, row_cnt + 1))
            with m.If(eq(row_cnt, 0)):
                # the marker row is dropped; whether it lined up is registered and acted on
                # in the next cycle (timing: keeps the marker recognition of the deskewed
                # row out of the alignment FSM's path)
                m.d.sync += [chk_ok.eq(Cat(*row_ok).all()), chk_due.eq(1)]
            with m.Elif(chk_due & ~chk_ok):
                m.d.sync += [align.eq(A_WAIT), primed.eq(0)]
                with m.If(self.o_align_failures != 0xFFFF):
                    m.d.sync += self.o_align_failures.eq(self.o_align_failures + 1)
            with m.Else():
                m.d.sync += [s_valid.eq(1), s_first.eq(~primed), primed.eq(1)]
                m.d.sync += [s_logical[j].eq(logical[j]) for j in range(n)]
        # output stage
        with m.If(s_valid):
            m.d.sync += hist.eq(hist_next)
            with m.If(~s_first):
                m.d.sync += self.o_data.valid.eq(1)
                for j in range(n):
                    m.d.sync += [self.o_data.payload[j].data.eq(words[j][0]),
                                 self.o_data.payload[j].ctrl.eq(words[j][1])]
                m.d.sync += dec_row.eq(Cat(*errs))
        return m

    def _elaborate_gearbox(self):
        """W < 66: gearbox, then the 66-bit receiver clocked by the gearbox's chunk strobe."""
        m = Module()
        n = self.n_lanes
        gb = m.submodules.gearbox = RxGearbox(n, self.serdes_width)
        core = PcsRx(n, self.am_period, self.max_skew, self.ber_window)
        m.submodules.core = EnableInserter(gb.o_valid)(core)
        stepped = Signal()    # the core's registers changed at the last edge
        m.d.sync += stepped.eq(gb.o_valid)
        for p in range(n):
            m.d.comb += [gb.i_lanes[p].eq(self.i_lanes[p]), core.i_lanes[p].eq(gb.o_chunks[p]),
                         self.o_lane_id[p].eq(core.o_lane_id[p]),
                         self.o_bip_errors[p].eq(core.o_bip_errors[p]),
                         self.o_slips[p].eq(core.o_slips[p])]
        m.d.comb += [
            self.o_data.payload.eq(core.o_data.payload),
            self.o_data.valid.eq(core.o_data.valid & stepped),
            self.o_link_up.eq(core.o_link_up),
            self.o_block_lock.eq(core.o_block_lock),
            self.o_am_lock.eq(core.o_am_lock),
            self.o_hi_ber.eq(core.o_hi_ber),
            self.o_decode_errors.eq(core.o_decode_errors),
            self.o_align_failures.eq(core.o_align_failures),
        ]
        return m
