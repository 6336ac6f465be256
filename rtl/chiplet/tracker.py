"""Completion timer at the accelerator port: every non-posted request completes."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.chiplet import SRC_BITS, TAG_BITS, Opcode, Status
from .common import beat_slots_layout, data_slots, port_layout, sat_inc

__all__ = ["CompletionTracker", "STAMP_BITS"]

#: Width of the cycle stamps (``cpl_timeout`` < 2**24, so an age is read before it wraps
#: unless an expired tag waits 2**24 cycles for room in the error queue).
STAMP_BITS = 25


class CompletionTracker(wiring.Component):
    """Tracks the tags of non-posted requests and completes the ones that get no answer.

    ``i_issue`` (from :class:`~fusionfabric.rtl.chiplet.tl_tx.TransactionTx`) marks a tag
    outstanding with the current cycle, the request's opcode and length; ``refused`` marks
    it for an ERROR completion (never sent). A scan visits tag ``now mod 256`` every cycle
    (memory read, the age compared one cycle later, the check in the cycle after that; the
    exact cycles: :class:`fusionfabric.sim.chiplet.CompletionTimerModel`): an outstanding
    tag that is refused or
    whose age has reached ``timeout`` is *expired* — freed, and queued for an error
    completion: status TIMEOUT (or ERROR if refused), opcode READ_CPL / WRITE_ACK /
    ATOMIC_ACK for READ / WRITE / ATOMIC_ADD, the request's length and tag (a READ_CPL
    carries ``length`` bytes of zeros), ``src`` and ``dest`` = ``i_node_id``. So a request
    without a completion is expired between ``timeout`` and ``timeout + 256`` cycles after
    it was taken (later only while the 4-entry error queue is full).

    Completions from the link (``i_cpl``) pass to ``o_rsp`` unchanged and without delay if
    their tag is outstanding when their first beat is accepted on ``o_rsp`` (the tag is
    freed then; the scan never expires a tag in the cycle it is delivered); otherwise
    (late: the tag expired, or was never issued) the whole message is dropped and counted
    in ``o_late``. Between messages ``o_rsp`` alternates between a waiting link completion
    and a queued error completion.

    Parameters
    ----------
    timeout : int
        ``cpl_timeout`` in cycles, 1..2**24 - 1.

    Members
    -------
    i_issue, i_issue_tag, i_issue_op, i_issue_len, i_issue_refused : In
        A non-posted request was taken (see :class:`TransactionTx`).
    i_node_id : In(8)
    i_cpl : In(stream.Signature(PORT_BEAT))
        Completions from the link (the VC 1 transaction layer).
    o_rsp : Out(stream.Signature(PORT_BEAT))
        Completions to the accelerator.
    o_timeouts, o_refused, o_late : Out(16)
        TIMEOUT and ERROR completions made; late completions dropped (saturating).
    """

    def __init__(self, timeout: int):
        if not 1 <= timeout < 1 << 24:
            raise ValueError(f"timeout={timeout} must be in 1..{(1 << 24) - 1}")
        self.timeout = timeout
        super().__init__({
            "i_issue": In(1),
            "i_issue_tag": In(TAG_BITS),
            "i_issue_op": In(4),
            "i_issue_len": In(2),
            "i_issue_refused": In(1),
            "i_node_id": In(SRC_BITS),
            "i_cpl": In(stream.Signature(port_layout())),
            "o_rsp": Out(stream.Signature(port_layout())),
            "o_timeouts": Out(16),
            "o_refused": Out(16),
            "o_late": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        ntag = 1 << TAG_BITS
        entry = data.StructLayout({"stamp": STAMP_BITS, "op": 4, "len": 2, "refused": 1})
        m.submodules.table = table = Memory(shape=entry, depth=ntag, init=[])
        wp = table.write_port()
        rp = table.read_port()
        now = Signal(STAMP_BITS)
        m.d.sync += now.eq(now + 1)
        outstanding = Signal(ntag)
        sets = Signal(ntag)
        clr_exp = Signal(ntag)         # expired by the scan
        clr_dlv = Signal(ntag)         # delivered
        m.d.sync += outstanding.eq((outstanding & ~clr_exp & ~clr_dlv) | sets)

        # issue: write the entry, set the bit
        m.d.comb += [wp.addr.eq(self.i_issue_tag), wp.en.eq(self.i_issue),
                     wp.data.stamp.eq(now), wp.data.op.eq(self.i_issue_op),
                     wp.data.len.eq(self.i_issue_len),
                     wp.data.refused.eq(self.i_issue_refused)]
        with m.If(self.i_issue):
            m.d.comb += sets.eq(1 << self.i_issue_tag)

        # scan: read tag now mod 256 (cycle k - 2), compare its age in the next cycle and
        # check the result in the one after (k): the block RAM's output and the age
        # comparison end in registers, apart from the outstanding bits and the queue. A
        # tag issued in the read cycle (its memory word not yet written) or the compare
        # cycle (the word read is an older request's) is skipped.
        sp = now[:TAG_BITS]
        m.d.comb += [rp.addr.eq(sp), rp.en.eq(1)]
        r_tag = Signal(TAG_BITS)
        r_on = Signal()
        m.d.sync += [r_tag.eq(sp),
                     r_on.eq(outstanding.bit_select(sp, 1)
                             & ~(self.i_issue & (self.i_issue_tag == sp)))]
        e = rp.data
        # due at k: (now + 1) - stamp >= timeout, compared one cycle ahead (at timeout 1
        # always: no comparison that would be constant)
        age = (now - e.stamp)[:STAMP_BITS]
        c_tag = Signal(TAG_BITS)
        c_on = Signal()
        c_due = Signal()
        c_entry = Signal(entry)
        m.d.sync += [c_tag.eq(r_tag), c_entry.eq(e),
                     c_on.eq(r_on & ~(self.i_issue & (self.i_issue_tag == r_tag))),
                     c_due.eq(e.refused | (age >= self.timeout - 1) if self.timeout > 1
                              else 1)]
        q = fifo.SyncFIFOBuffered(width=TAG_BITS + 4 + 2 + 1, depth=4)
        m.submodules.errq = q
        # a link completion's first beat is taken now if its tag is outstanding: written
        # without that lookup, which changes nothing where it is used (the scan's tag is
        # outstanding, and clearing a bit already clear is no change), so the lookup on the
        # completion's tag stays out of the expiry and the clearing
        offered = Signal()
        offered_tag = self.i_cpl.payload.tag
        expire = Signal()
        m.d.comb += expire.eq(c_on & c_due & outstanding.bit_select(c_tag, 1) & q.w_rdy
                              & ~(offered & (offered_tag == c_tag)))
        m.d.comb += [q.w_en.eq(expire),
                     q.w_data.eq(c_tag | (c_entry.op << TAG_BITS)
                                 | (c_entry.len << (TAG_BITS + 4))
                                 | (c_entry.refused << (TAG_BITS + 6)))]
        with m.If(expire):
            m.d.comb += clr_exp.eq(1 << c_tag)
        timeouts, refused, late = Signal(16), Signal(16), Signal(16)
        m.d.comb += [self.o_timeouts.eq(timeouts), self.o_refused.eq(refused),
                     self.o_late.eq(late)]
        sat_inc(m, timeouts, expire & ~c_entry.refused)
        sat_inc(m, refused, expire & c_entry.refused)

        # o_rsp: IDLE between messages; PASS / DROP a link completion; ERR a queued one
        mode = Signal(2)              # 0 idle, 1 pass, 2 drop, 3 error completion
        left = Signal(5)              # beats left after the current one
        prefer_err = Signal()
        cpl = self.i_cpl.payload
        cpl_beats = Signal(5)
        m.d.comb += cpl_beats.eq(data_slots(cpl.opcode, cpl.length))
        is_out = outstanding.bit_select(cpl.tag, 1)
        # the queued error completion
        q_tag = q.r_data[:TAG_BITS]
        q_op = q.r_data[TAG_BITS:TAG_BITS + 4]
        q_len = q.r_data[TAG_BITS + 4:TAG_BITS + 6]
        q_ref = q.r_data[TAG_BITS + 6]
        err_hdr = Signal(beat_slots_layout())
        rsp_op = Mux(q_op == Opcode.READ, Opcode.READ_CPL,
                     Mux(q_op == Opcode.WRITE, Opcode.WRITE_ACK, Opcode.ATOMIC_ACK))
        m.d.comb += [err_hdr.hdr.opcode.eq(rsp_op), err_hdr.hdr.length.eq(q_len),
                     err_hdr.hdr.status.eq(Mux(q_ref, Status.ERROR, Status.TIMEOUT)),
                     err_hdr.hdr.tag.eq(q_tag), err_hdr.hdr.dest.eq(self.i_node_id),
                     err_hdr.hdr.src.eq(self.i_node_id)]
        err_beats = Signal(5)
        m.d.comb += err_beats.eq(data_slots(rsp_op, q_len))

        # The handshake signals are plain expressions (continuous assignments in Verilog),
        # not assignments inside the mode switch: Icarus never runs an ``always @*`` whose
        # inputs keep their time-0 values, which would leave o_rsp.valid at X after reset.
        take_err = Signal()
        m.d.comb += take_err.eq(q.r_rdy & (prefer_err | ~self.i_cpl.valid))
        idle = mode == 0
        m.d.comb += offered.eq(idle & ~take_err & self.i_cpl.valid & self.o_rsp.ready)
        err_mode = (mode == 3) | (idle & take_err)
        pass_mode = (mode == 1) | (idle & ~take_err & self.i_cpl.valid & is_out)
        drop_mode = (mode == 2) | (idle & ~take_err & self.i_cpl.valid & ~is_out)
        m.d.comb += [
            self.o_rsp.valid.eq(err_mode | (pass_mode & self.i_cpl.valid)),
            self.o_rsp.payload.eq(Mux(err_mode, err_hdr.as_value(), cpl.as_value())),
            self.i_cpl.ready.eq((pass_mode & self.o_rsp.ready) | drop_mode),
        ]

        with m.Switch(mode):
            with m.Case(0):
                with m.If(take_err):
                    with m.If(self.o_rsp.ready):
                        m.d.sync += prefer_err.eq(0)
                        with m.If(err_beats > 1):
                            m.d.sync += [mode.eq(3), left.eq(err_beats - 1)]
                        with m.Else():
                            m.d.comb += q.r_en.eq(1)
                with m.Elif(self.i_cpl.valid & is_out):
                    with m.If(self.o_rsp.ready):
                        m.d.sync += prefer_err.eq(1)
                        with m.If(cpl_beats > 1):
                            m.d.sync += [mode.eq(1), left.eq(cpl_beats - 1)]
                with m.Elif(self.i_cpl.valid):
                    sat_inc(m, late, 1)
                    with m.If(cpl_beats > 1):
                        m.d.sync += [mode.eq(2), left.eq(cpl_beats - 1)]
            with m.Case(1):
                with m.If(self.i_cpl.valid & self.o_rsp.ready):
                    m.d.sync += left.eq(left - 1)
                    with m.If(left == 1):
                        m.d.sync += mode.eq(0)
            with m.Case(2):
                with m.If(self.i_cpl.valid):
                    m.d.sync += left.eq(left - 1)
                    with m.If(left == 1):
                        m.d.sync += mode.eq(0)
            with m.Case(3):
                with m.If(self.o_rsp.ready):
                    m.d.sync += left.eq(left - 1)
                    with m.If(left == 1):
                        m.d.sync += mode.eq(0)
                        m.d.comb += q.r_en.eq(1)
        with m.If(offered):
            m.d.comb += clr_dlv.eq(1 << offered_tag)
        return m
