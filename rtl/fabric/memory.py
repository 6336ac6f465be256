"""The memory target of a ``cpu`` endpoint: a memory behind a chiplet's accelerator port.

Spec: docs/fabric.md, "Memory target (cpu endpoints)"; model: :mod:`fusionfabric.sim.memory`.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.chiplet import SLOT_BITS, SRC_BITS, Opcode, Status
from fusionfabric.formats.memory import MEM_STATUS, WORD_BYTES, check_mem_bytes
from fusionfabric.rtl.blocks import Block, Param
from fusionfabric.rtl.chiplet.common import beat_slots_layout, port_layout, sat_inc

__all__ = ["MemTarget", "FAULTS", "BLOCKS", "LINT_PARAMS"]

#: Test-only planted faults (not block parameters): ``"no-forward"`` builds the read port
#: without write-to-read forwarding, so an ATOMIC_ADD or READ of a word written in the same
#: cycle reads the old value (the hazard the forwarding closes; the tests must catch it).
FAULTS = ("none", "no-forward")


class MemTarget(wiring.Component):
    """A memory that serves WRITE, READ and ATOMIC_ADD requests from a chiplet's ``o_req``
    and answers on the chiplet's ``i_rsp`` (docs/fabric.md, "Memory target").

    Requests are served one beat per cycle in the order they arrive. WRITE stores its
    ``length`` bytes, READ returns them in a READ_CPL of ``length / 16`` beats, ATOMIC_ADD
    adds its payload as int32 lanes (little-endian, wrap-around) into memory; WRITE_ACK and
    ATOMIC_ACK are one beat. Every completion carries the request's ``length`` and ``tag``,
    ``dest`` = the request's ``src``, ``src`` = ``i_node_id`` and ``status`` OK, or ERROR
    when ``addr`` is not a multiple of 16 or ``addr + length > mem_bytes``: then nothing is
    written and a READ_CPL carries zeros. A beat whose opcode is not WRITE, READ or
    ATOMIC_ADD where a message starts is dropped and counted (``dropped``).

    Parameters
    ----------
    mem_bytes : int
        Memory size in bytes, a power of two in 64..2**20; words of 16 bytes.
    fault : str
        Test only (:data:`FAULTS`), not a block parameter: ``"none"``.

    Members
    -------
    i_req : In(stream.Signature(PORT_BEAT))
        Requests: connect the chiplet's ``o_req``. Header fields are sampled on a
        message's first beat.
    o_rsp : Out(stream.Signature(PORT_BEAT))
        Completions: connect the chiplet's ``i_rsp``.
    i_node_id : In(8)
        ``src`` of every completion.
    o_status : Out(MEM_STATUS)
        Saturating counters: ``reads``, ``writes``, ``atomics`` (requests completed OK),
        ``errors`` (requests completed ERROR), ``dropped`` (beats not served).
    mem : amaranth.lib.memory.Memory
        The storage (``mem_bytes / 16`` words of 128 bits, byte ``k`` of a word in bits
        ``8k..8k+7``), for testbenches.

    Timing
    ------
    A completion's first beat is valid on ``o_rsp`` the cycle after the request's last
    beat is taken (READ: its only beat), with no further wait; a READ_CPL then streams one
    beat per cycle under ``o_rsp.ready``. ``i_req`` takes one beat per cycle except while
    a READ_CPL has beats not yet read from memory, and while the completion register is
    full at a beat that makes a completion (backpressure on ``o_rsp`` reaches ``i_req``
    only there). ``i_req.ready`` depends combinationally on ``o_rsp.ready`` (a completion
    taken makes room in the same cycle); ``o_rsp``'s valid and payload come from
    registers and the read port only, never from ``i_req``. Writes land in memory the cycle after their beat is taken (ATOMIC_ADD:
    read in the beat's cycle, sum written the next); the read port forwards a write of the
    same cycle, so every request sees the memory as left by every earlier request.
    Reset: idle, counters zero; the memory keeps its contents (initially zero).
    """

    def __init__(self, mem_bytes: int = 4096, *, fault: str = "none"):
        self.mem_bytes = check_mem_bytes(mem_bytes)
        if fault not in FAULTS:
            raise ValueError(f"fault={fault!r} is not one of {', '.join(FAULTS)}")
        self.fault = fault
        self.words = mem_bytes // WORD_BYTES
        self.mem = Memory(shape=SLOT_BITS, depth=self.words, init=[])
        super().__init__({
            "i_req": In(stream.Signature(port_layout())),
            "o_rsp": Out(stream.Signature(port_layout())),
            "i_node_id": In(SRC_BITS),
            "o_status": Out(MEM_STATUS.layout()),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = self.mem
        wp = mem.write_port()
        rp = mem.read_port(transparent_for=() if self.fault == "no-forward" else (wp,))
        aw = (self.words - 1).bit_length()          # word-address bits (words >= 4)

        req, rsp = self.i_req, self.o_rsp
        beat = data.View(beat_slots_layout(), req.payload.as_value())
        h = beat.hdr
        out = data.View(beat_slots_layout(), rsp.payload.as_value())

        # -- message state (registers) ------------------------------------------------
        in_msg = Signal()           # inside a WRITE/ATOMIC_ADD message, past its first beat
        msg_atomic = Signal()
        msg_err = Signal()
        msg_ptr = Signal(aw)        # word of the next beat
        msg_left = Signal(4)        # beats after the next one
        msg_length = Signal(2)
        msg_tag = Signal(8)
        msg_src = Signal(SRC_BITS)

        rd_active = Signal()        # READ_CPL beats left to read from memory
        rd_ptr = Signal(aw)
        rd_left = Signal(4)         # beats after the next one

        dv = Signal()               # completion register holds a beat
        out_mem = Signal()          # ... whose data is the read port's output
        out_op = Signal(4)
        out_status = Signal(2)
        out_length = Signal(2)
        out_tag = Signal(8)
        out_dest = Signal(8)

        s1_v = Signal()             # write stage: a word to write this cycle
        s1_atomic = Signal()
        s1_word = Signal(aw)
        s1_data = Signal(SLOT_BITS)

        # -- the beat on i_req (combinational, as expressions: Icarus note, docs/fabric.md)
        first = Signal()
        op_w, op_r, op_a, op_drop = Signal(), Signal(), Signal(), Signal()
        nbeats = Signal(5)
        ok = Signal()
        cur_w, cur_a, cur_r, cur_err, cur_last = (Signal(name=f"cur_{n}") for n in
                                                  ("w", "a", "r", "err", "last"))
        cur_word = Signal(aw)
        needs_issue, needs_rp = Signal(), Signal()
        can_issue, rp_free, accept = Signal(), Signal(), Signal()
        m.d.comb += [
            first.eq(~in_msg),
            op_w.eq(h.opcode == Opcode.WRITE),
            op_r.eq(h.opcode == Opcode.READ),
            op_a.eq(h.opcode == Opcode.ATOMIC_ADD),
            op_drop.eq(first & ~(op_w | op_r | op_a)),
            nbeats.eq((h.length + 1) << 2),
            # aligned, and addr + length <= mem_bytes
            ok.eq((h.addr[:4] == 0) & (h.addr[4 + aw:] == 0)
                  & (h.addr[4:4 + aw] + nbeats <= self.words)),
            cur_w.eq(Mux(first, op_w, ~msg_atomic)),
            cur_a.eq(Mux(first, op_a, msg_atomic)),
            cur_r.eq(first & op_r),
            cur_err.eq(Mux(first, ~ok, msg_err)),
            cur_last.eq(~first & (msg_left == 0)),       # WRITE/ATOMIC: never the first beat
            cur_word.eq(Mux(first, h.addr[4:4 + aw], msg_ptr)),
            needs_issue.eq(cur_r | ((cur_w | cur_a) & cur_last)),
            needs_rp.eq(cur_r | cur_a),
            can_issue.eq(~dv | rsp.ready),
            rp_free.eq(~(dv & out_mem) | rsp.ready),
            req.ready.eq(~rd_active & (~needs_issue | can_issue) & (~needs_rp | rp_free)),
            accept.eq(req.valid & req.ready),
        ]

        # -- read port: the READ_CPL streamer while active, else the accepted beat --------
        rd_issue = Signal()
        m.d.comb += [
            rd_issue.eq(rd_active & can_issue),
            rp.addr.eq(Mux(rd_active, rd_ptr, cur_word)),
            rp.en.eq(Mux(rd_active, can_issue, accept & needs_rp)),
        ]

        # -- write stage: WRITE data, or the int32 lane sums of an ATOMIC_ADD ------------
        lanes = Cat(*[(rp.data[32 * i:32 * i + 32] + s1_data[32 * i:32 * i + 32])[:32]
                      for i in range(SLOT_BITS // 32)])
        m.d.comb += [
            wp.addr.eq(s1_word),
            wp.en.eq(s1_v),
            wp.data.eq(Mux(s1_atomic, lanes, s1_data)),
        ]
        m.d.sync += [
            s1_v.eq(accept & (cur_w | cur_a) & ~cur_err),
            s1_atomic.eq(cur_a),
            s1_word.eq(cur_word),
            s1_data.eq(beat.data),
        ]

        # -- message state ---------------------------------------------------------------
        with m.If(accept & first & (op_w | op_a)):
            m.d.sync += [in_msg.eq(1), msg_atomic.eq(op_a), msg_err.eq(~ok),
                         msg_ptr.eq(h.addr[4:4 + aw] + 1), msg_left.eq(nbeats - 2),
                         msg_length.eq(h.length), msg_tag.eq(h.tag), msg_src.eq(h.src)]
        with m.Elif(accept & in_msg):
            m.d.sync += [msg_ptr.eq(msg_ptr + 1), msg_left.eq(msg_left - 1)]
            with m.If(msg_left == 0):
                m.d.sync += in_msg.eq(0)

        # -- completion register ----------------------------------------------------------
        with m.If(accept & cur_r):
            m.d.sync += [dv.eq(1), out_mem.eq(ok), out_op.eq(Opcode.READ_CPL),
                         out_status.eq(Mux(ok, Status.OK, Status.ERROR)),
                         out_length.eq(h.length), out_tag.eq(h.tag), out_dest.eq(h.src),
                         rd_active.eq(1), rd_ptr.eq(h.addr[4:4 + aw] + 1),
                         rd_left.eq(nbeats - 2)]
        with m.Elif(accept & needs_issue):
            m.d.sync += [dv.eq(1), out_mem.eq(0),
                         out_op.eq(Mux(msg_atomic, Opcode.ATOMIC_ACK, Opcode.WRITE_ACK)),
                         out_status.eq(Mux(msg_err, Status.ERROR, Status.OK)),
                         out_length.eq(msg_length), out_tag.eq(msg_tag),
                         out_dest.eq(msg_src)]
        with m.Elif(rd_issue):
            m.d.sync += [dv.eq(1), rd_ptr.eq(rd_ptr + 1), rd_left.eq(rd_left - 1)]
            with m.If(rd_left == 0):
                m.d.sync += rd_active.eq(0)
        with m.Elif(rsp.ready):
            m.d.sync += dv.eq(0)

        m.d.comb += [
            rsp.valid.eq(dv),
            out.data.eq(Mux(out_mem, rp.data, 0)),
            out.hdr.opcode.eq(out_op),
            out.hdr.length.eq(out_length),
            out.hdr.status.eq(out_status),
            out.hdr.tag.eq(out_tag),
            out.hdr.dest.eq(out_dest),
            out.hdr.src.eq(self.i_node_id),
        ]

        # -- counters ---------------------------------------------------------------------
        st = self.o_status
        done = accept & needs_issue
        sat_inc(m, st.reads, done & cur_r & ~cur_err)
        sat_inc(m, st.writes, done & cur_w & ~cur_r & ~cur_err)
        sat_inc(m, st.atomics, done & cur_a & ~cur_err)
        sat_inc(m, st.errors, done & cur_err)
        sat_inc(m, st.dropped, accept & op_drop)
        return m


def _build(mem_bytes: int = 4096) -> MemTarget:
    return MemTarget(mem_bytes)


BLOCKS = [
    Block("mem-target", _build, doc="Memory behind a chiplet's accelerator port: WRITE, "
          "READ, ATOMIC_ADD (int32) with OK/ERROR completions (docs/fabric.md)",
          params=[Param("mem_bytes", int, 4096, "memory size in bytes (power of two, "
                        "64..2**20; 16-byte words)")]),
]

#: Lint sets beside the default (fusionfabric.lint): the smallest memory (4 words).
LINT_PARAMS = {"mem-target": [{"mem_bytes": 64}]}
