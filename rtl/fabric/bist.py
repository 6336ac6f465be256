"""Built-in self-test of the whole fabric at the accelerator ports (block ``fabric-bist``).

:class:`PortTrafficGen` issues seeded WRITE messages on an endpoint's ``i_req``;
:class:`PortTrafficCheck` checks what arrives on an endpoint's ``o_req``/``o_rsp``;
:class:`FabricBist` is :class:`fusionfabric.rtl.fabric.Fabric` with one of each per endpoint and every
counter on a port, so a test (or an FPGA) only configures, starts, waits and reads
counters. The LFSR and data-signature logic are those of :mod:`fusionfabric.rtl.bist` (generated from
the PRBS31 recurrence); :class:`fusionfabric.sim.bist.PortGenModel` predicts every message
(docs/bist.md, "Fabric BIST").
"""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from fusionfabric.rtl.bist import COUNTER_BITS, advance_matrix, lfsr_advance, make_data, start_gate
from fusionfabric.rtl.blocks import Block, Param
from fusionfabric.rtl.chiplet.common import data_slots, port_layout
from fusionfabric.formats.bist import (BEAT_BITS, BIST_CONTROL, BIST_SEQ_BITS, LFSR_ORDER,
                                      PORT_DATA_BITS, PORT_FAULTS, PORT_FLIP_BIT, PORT_LENGTHS,
                                      PORT_STREAMS, check_port_gen_params, seed_state)
from fusionfabric.rtl.hdl import eq, gf2_apply_int, sat_inc
from fusionfabric.formats.chiplet import Opcode

from .fabric import Fabric

__all__ = ["PortTrafficGen", "PortTrafficCheck", "FabricBist", "BLOCKS"]

# beat counters are the signature's width (make_data takes beat[:8]); messages have <= 16
BEAT_COUNT_BITS = BEAT_BITS


class PortTrafficGen(wiring.Component):
    """Seeded WRITE generator for one accelerator request port.

    Issues WRITE messages to the other endpoints (the checkers send no WRITE_ACK; the
    chiplet tracks a WRITE's tag as a non-posted request's, so with ``cpl_timeout`` on, a tag
    not reissued within that many cycles gets a TIMEOUT completion, which the checker
    counts in ``o_rsp_beats``: a run that stops issuing for longer sees them), destination
    and length drawn from a PRBS31 LFSR, with a per-destination
    16-bit sequence number in ``addr`` (and its low byte in ``tag``) and data beat ``b`` =
    ``fusionfabric.sim.bist.make_data(128, endpoint, dest, seq, b)``. The message sequence is that of
    :class:`fusionfabric.sim.bist.PortGenModel`, independent of load and backpressure.

    Parameters
    ----------
    n_endpoints : int
        Endpoints (2..256); destinations are every endpoint but ``endpoint``.
    endpoint : int
        This generator's endpoint (the message ``src`` and the data signature's source).
    max_bytes : int
        Longest message, one of 64, 128, 192, 256; lengths are uniform-ish over the
        lengths up to it.
    seed : int
        32-bit seed of the message and load LFSRs (streams 3 and 4 of
        ``fusionfabric.formats.bist.seed_state``).
    fault, fault_at : str, int
        Test only (a checker must be able to fail): ``"flip"`` inverts data bit 100 of
        every beat of message ``fault_at`` (counting from 0); ``"skip"`` gives message
        ``fault_at`` the sequence number one past the right one. ``"none"``: no logic.

    Members
    -------
    o_req : Out(stream.Signature(sim.chiplet.PORT_BEAT))
        The messages (header fields on every beat).
    i_enable : In(1)
        Start new messages while high; a started message always completes.
    i_budget : In(32)
        Messages to start in total since reset (0: no limit).
    i_load : In(9)
        When free, a message starts in a cycle with probability i_load/256 (256: back to
        back).
    o_messages, o_beats : Out(32)
        Messages (counted on their last beat) and beats handed over, wrapping.
    o_started : Out(32)
        Messages started (what the budget counts).
    o_done : Out(1)
        ``i_budget != 0``, the budget is used up and the last message has left.
    o_next_seq : Out(16).array(n_endpoints)
        Per destination, the sequence number of the next message (= messages started to
        it, mod 2**16, without a planted ``skip``).

    Timing
    ------
    A message decided in cycle t shows its first beat in t+1; the generator is free again
    in the cycle its last beat is accepted, so at ``i_load = 256`` messages follow back to
    back. ``valid`` never depends on ``ready``. Counters update the cycle after the
    handshake. Reset (synchronous) restarts the LFSRs from their seeds and clears the
    sequence table and counters.
    """

    def __init__(self, n_endpoints: int = 2, endpoint: int = 0, max_bytes: int = 256,
                 seed: int = 1, fault: str = "none", fault_at: int = 0):
        check_port_gen_params(n_endpoints, endpoint, max_bytes, seed, fault, fault_at)
        self.n_endpoints, self.endpoint, self.max_bytes = n_endpoints, endpoint, max_bytes
        self.seed, self.fault, self.fault_at = seed, fault, fault_at
        self.n_codes = PORT_LENGTHS.index(max_bytes) + 1
        super().__init__({
            "o_req": Out(stream.Signature(port_layout())),
            "i_enable": In(1),
            "i_budget": In(COUNTER_BITS),
            "i_load": In(9),
            "o_messages": Out(COUNTER_BITS),
            "o_beats": Out(COUNTER_BITS),
            "o_started": Out(COUNTER_BITS),
            "o_done": Out(1),
            "o_next_seq": Out(BIST_SEQ_BITS).array(n_endpoints),
        })

    def elaborate(self, platform):
        m = Module()
        n, me = self.n_endpoints, self.endpoint
        a31, a8 = advance_matrix(LFSR_ORDER), advance_matrix(8)
        msg_r = Signal(LFSR_ORDER, init=gf2_apply_int(
            a31, seed_state(self.seed, me, PORT_STREAMS["message"])))
        load_r = Signal(LFSR_ORDER, init=gf2_apply_int(
            a8, seed_state(self.seed, me, PORT_STREAMS["load"])))
        m.d.sync += load_r.eq(lfsr_advance(m, load_r, a8, "load_next"))

        d = Signal(8)
        next_dest = Signal(8)
        next_code = Signal(2)
        m.d.comb += [d.eq((msg_r[:16] * (n - 1))[16:]),
                     # skip over this endpoint (``d >= 0`` would lint as constant)
                     next_dest.eq(d + (d >= me) if me else d + 1),
                     next_code.eq((msg_r[16:24] * self.n_codes)[8:10])]

        seqs = Array(Signal(BIST_SEQ_BITS, name=f"next_seq{i}") for i in range(n))
        for i in range(n):
            m.d.comb += self.o_next_seq[i].eq(seqs[i])

        active = Signal()
        dest = Signal(8)
        code = Signal(2)
        beat = Signal(BEAT_COUNT_BITS)
        seq = Signal(BIST_SEQ_BITS)
        started = Signal(COUNTER_BITS)
        flip = Signal()

        o = self.o_req
        accept = Signal()
        is_last = Signal()
        data = make_data(m, PORT_DATA_BITS, Const(me, 8), dest, seq, beat)
        if self.fault == "flip":
            data = data ^ Mux(flip, 1 << PORT_FLIP_BIT, 0)
        m.d.comb += [
            accept.eq(o.valid & o.ready),
            is_last.eq(beat == Cat(Const(3, 2), code)),      # beat 4 * code + 3
            o.valid.eq(active),
            o.payload.data.eq(data),
            o.payload.opcode.eq(Opcode.WRITE),
            o.payload.length.eq(code),
            o.payload.tag.eq(seq[:8]),
            o.payload.dest.eq(dest),
            o.payload.src.eq(me),
            o.payload.addr.eq(seq),
            self.o_started.eq(started),
            self.o_done.eq(self.i_budget.any() & (started >= self.i_budget) & ~active),
        ]

        go = start_gate(m, active=active, done_now=accept & is_last, enable=self.i_enable,
                        budget=self.i_budget, load=self.i_load, draw=load_r[:8], started=started)

        skip = Const(0, 1)
        if self.fault == "skip":
            skip = started == self.fault_at
        cur = seqs[next_dest]
        with m.If(go):
            m.d.sync += [
                active.eq(1), dest.eq(next_dest), code.eq(next_code), beat.eq(0),
                seq.eq(cur + skip), cur.eq(cur + skip + 1),
                msg_r.eq(lfsr_advance(m, msg_r, a31, "msg_next")),
            ]
            if self.fault == "flip":
                m.d.sync += flip.eq(started == self.fault_at)
        with m.Elif(accept & is_last):
            m.d.sync += active.eq(0)
        with m.Elif(accept):
            m.d.sync += beat.eq(beat + 1)
        with m.If(accept):
            m.d.sync += self.o_beats.eq(self.o_beats + 1)
            with m.If(is_last):
                m.d.sync += self.o_messages.eq(self.o_messages + 1)
        return m


class PortTrafficCheck(wiring.Component):
    """Checker of :class:`PortTrafficGen` traffic arriving at one endpoint.

    Takes the endpoint's ``o_req`` (requests for it) and ``o_rsp`` (responses to its
    requests; a BIST endpoint sends none, so every beat there is counted). Per message on
    ``i_req`` (framed by its opcode and length, ``fusionfabric.sim.chiplet.data_slots``): a message
    whose opcode is not WRITE is counted in ``o_unexpected`` and not checked further. For
    a WRITE, every beat is good iff ``src < n_endpoints``, ``dest == endpoint`` and
    ``data == make_data(128, src, endpoint, seq, beat)`` with ``src`` and ``seq =
    addr[0:16]`` from the message's first beat; a bad beat is one data error. On the first
    beat, if it is good: a sequence error if ``seq != expected[src]``, then
    ``expected[src] = seq + 1``; if it is not good (its ``seq`` cannot be trusted):
    ``expected[src] += 1``. (The counting rules of :class:`fusionfabric.rtl.bist.TrafficCheck`: one
    lost or duplicated message = one sequence error, a flipped bit = one data error per
    beat it hits.)

    Parameters
    ----------
    n_endpoints : int
        Endpoints = sources tracked (2..256).
    endpoint : int
        This checker's endpoint (the destination every message must carry).
    seed : int
        32-bit seed of the backpressure LFSR (stream 5 of ``fusionfabric.formats.bist.seed_state``).

    Members
    -------
    i_req : In(stream.Signature(sim.chiplet.PORT_BEAT))
        Requests delivered to the endpoint.
    i_rsp : In(stream.Signature(sim.chiplet.PORT_BEAT))
        Responses delivered to the endpoint (always ready).
    i_stall : In(8)
        Backpressure on ``i_req``: ``ready`` is low in a cycle with probability i_stall/256.
    o_messages, o_beats : Out(32)
        Messages (first beats) and beats received on ``i_req``, wrapping.
    o_seq_errors, o_data_errors, o_unexpected : Out(32)
        Error counters (saturating): sequence errors, bad beats, non-WRITE messages.
    o_rsp_beats : Out(32)
        Beats received on ``i_rsp`` (saturating).
    o_expected : Out(16).array(n_endpoints)
        Per source, the sequence number expected next (= WRITE messages received from it
        when no error happened).

    Timing
    ------
    A beat accepted in cycle t is registered, compared in t+1, counted in t+2, and shows in
    the counters and ``o_expected`` from cycle **t+3**. One beat per cycle. Reset
    (synchronous) clears counters and the table and restarts the backpressure LFSR.
    """

    def __init__(self, n_endpoints: int = 2, endpoint: int = 0, seed: int = 1):
        check_port_gen_params(n_endpoints, endpoint, PORT_LENGTHS[-1], seed)
        self.n_endpoints, self.endpoint, self.seed = n_endpoints, endpoint, seed
        beat = stream.Signature(port_layout())
        super().__init__({
            "i_req": In(beat),
            "i_rsp": In(beat),
            "i_stall": In(8),
            "o_messages": Out(COUNTER_BITS),
            "o_beats": Out(COUNTER_BITS),
            "o_seq_errors": Out(COUNTER_BITS),
            "o_data_errors": Out(COUNTER_BITS),
            "o_unexpected": Out(COUNTER_BITS),
            "o_rsp_beats": Out(COUNTER_BITS),
            "o_expected": Out(BIST_SEQ_BITS).array(n_endpoints),
        })

    def elaborate(self, platform):
        m = Module()
        n, me = self.n_endpoints, self.endpoint
        a8 = advance_matrix(8)
        stall_r = Signal(LFSR_ORDER, init=gf2_apply_int(
            a8, seed_state(self.seed, me, PORT_STREAMS["stall"])))
        m.d.sync += stall_r.eq(lfsr_advance(m, stall_r, a8, "stall_next"))
        i = self.i_req
        m.d.comb += [i.ready.eq(~(stall_r[:8] < self.i_stall)), self.i_rsp.ready.eq(1)]
        with m.If(self.i_rsp.valid):
            sat_inc(m, self.o_rsp_beats)

        # Stage 1: registered beat.
        r_valid = Signal()
        r = Signal(port_layout())
        m.d.sync += r_valid.eq(i.valid & i.ready)
        with m.If(i.valid & i.ready):
            m.d.sync += r.eq(i.payload)

        expected = Array(Signal(BIST_SEQ_BITS, name=f"expected{k}") for k in range(n))
        for k in range(n):
            m.d.comb += self.o_expected[k].eq(expected[k])
        in_msg = Signal()
        beat = Signal(BEAT_COUNT_BITS)
        last_beat = Signal(BEAT_COUNT_BITS)
        msg_seq = Signal(BIST_SEQ_BITS)
        msg_src = Signal(8)
        msg_write = Signal()

        starts = ~in_msg
        beat_now = Signal(BEAT_COUNT_BITS)
        last_now = Signal(BEAT_COUNT_BITS)
        seq_now = Signal(BIST_SEQ_BITS)
        src_now = Signal(8)
        write_now = Signal()
        slots = Signal(range(17))
        good = Signal()
        want = make_data(m, PORT_DATA_BITS, src_now, Const(me, 8), seq_now, beat_now)
        m.d.comb += [
            slots.eq(data_slots(r.opcode, r.length)),
            beat_now.eq(Mux(starts, 0, beat + 1)),
            last_now.eq(Mux(starts, Mux(slots.any(), slots - 1, 0), last_beat)),
            seq_now.eq(Mux(starts, r.addr[:BIST_SEQ_BITS], msg_seq)),
            src_now.eq(Mux(starts, r.src, msg_src)),
            write_now.eq(Mux(starts, r.opcode == Opcode.WRITE, msg_write)),
            good.eq((src_now < n) & eq(r.dest, me) & (r.data == want)),
        ]

        # Stage 2 (t+1): message state and the comparison, registered.
        c_valid, c_good, c_starts, c_write, c_src_ok = (
            Signal(name=f"c_{k}") for k in ("valid", "good", "starts", "write", "src_ok"))
        c_seq = Signal(BIST_SEQ_BITS)
        c_src = Signal(8)
        m.d.sync += [c_valid.eq(r_valid), c_good.eq(good), c_starts.eq(starts),
                     c_write.eq(write_now), c_src_ok.eq(src_now < n), c_seq.eq(seq_now),
                     c_src.eq(src_now)]
        with m.If(r_valid):
            m.d.sync += [in_msg.eq(beat_now != last_now), beat.eq(beat_now),
                         last_beat.eq(last_now)]
            with m.If(starts):
                m.d.sync += [msg_seq.eq(seq_now), msg_src.eq(src_now),
                             msg_write.eq(write_now)]

        # Stage 3 (t+2): counters and the per-source table.
        with m.If(c_valid):
            m.d.sync += self.o_beats.eq(self.o_beats + 1)
            with m.If(c_starts):
                m.d.sync += self.o_messages.eq(self.o_messages + 1)
                with m.If(~c_write):
                    sat_inc(m, self.o_unexpected)
            with m.If(c_write & ~c_good):
                sat_inc(m, self.o_data_errors)
            with m.If(c_write & c_starts & c_src_ok):
                exp = expected[c_src]
                with m.If(c_good):
                    with m.If(c_seq != exp):
                        sat_inc(m, self.o_seq_errors)
                    m.d.sync += exp.eq(c_seq + 1)
                with m.Else():
                    m.d.sync += exp.eq(exp + 1)
        return m


#: The fabric's ports that :class:`FabricBist` passes through unchanged.
PASS_IN = ("i_config", "i_fault")
PASS_OUT = ("o_ep_status", "o_sw_status", "o_link", "o_flips", "o_stats", "o_unit_stats",
            "o_config_drops", "o_bridge_drops")


class FabricBist(wiring.Component):
    """The fabric with a BIST generator and checker on every accelerator port
    (block ``fabric-bist``).

    Endpoint ``e``'s :class:`PortTrafficGen` drives ``Fabric.i_req[e]``; its
    :class:`PortTrafficCheck` takes ``Fabric.o_req[e]`` and ``o_rsp[e]``; ``i_rsp[e]`` is
    idle (zero). Nothing else is added: every port of :class:`fusionfabric.rtl.fabric.Fabric` but the
    accelerator ports is passed through, plus one control word and the counters.

    Parameters
    ----------
    max_bytes : int
        Longest message (64, 128, 192, 256), every generator.
    bist_seed : int
        32-bit seed of every generator and checker LFSR.
    fault, fault_at : str, int
        Planted fault in generator 0 only (test only; :class:`PortTrafficGen`).
    **fabric_params
        Any :class:`fusionfabric.rtl.fabric.Fabric` parameter (``n_endpoints``, ``latency``, ...).

    Members
    -------
    i_bist : In(sim.bist.BIST_CONTROL)
        ``enable``, ``load`` (0..256), ``stall`` (checker backpressure /256), ``budget``
        (messages per generator, 0 = forever), the same for every endpoint.
    i_config, i_fault, o_ep_status, o_sw_status, o_link, o_flips, o_stats, o_unit_stats,
    o_config_drops, o_bridge_drops, o_fec
        The fabric's (docs/fabric.md; ``o_fec`` only with ``lane_profile="rs544"``).
    o_gen_messages, o_gen_beats : Out(32).array(n)
        Per generator (:class:`PortTrafficGen` ``o_messages``, ``o_beats``).
    o_gen_done : Out(n)
        Bit ``e``: generator ``e`` is done.
    o_gen_next_seq : Out(16).array(n, n)
        ``[s][d]``: generator ``s``'s next sequence number to ``d``.
    o_chk_messages, o_chk_beats, o_seq_errors, o_data_errors, o_unexpected,
    o_rsp_beats : Out(32).array(n)
        Per checker (:class:`PortTrafficCheck`).
    o_chk_expected : Out(16).array(n, n)
        ``[d][s]``: checker ``d``'s expected sequence number from ``s``. At the end of a
        clean run ``o_chk_expected[d][s] == o_gen_next_seq[s][d]`` for every pair.

    Timing
    ------
    The fabric's (links up about 440 cycles after reset with the defaults; generators
    enabled earlier wait on ``ready``) plus the checker's 3 cycles to the counters.
    Reset: everything.
    """

    def __init__(self, max_bytes: int = 256, bist_seed: int = 1, fault: str = "none",
                 fault_at: int = 0, **fabric_params):
        # the BIST parameters first, so that a bad one builds no fabric (checked again with
        # the fabric's endpoint count below)
        check_port_gen_params(2, 0, max_bytes, bist_seed, fault, fault_at)
        self.fabric = Fabric(**fabric_params)
        n = self.n_endpoints = self.fabric.n_endpoints
        check_port_gen_params(n, 0, max_bytes, bist_seed, fault, fault_at)
        self.max_bytes, self.bist_seed, self.fault, self.fault_at = (max_bytes, bist_seed,
                                                                     fault, fault_at)
        self.gens = [PortTrafficGen(n, e, max_bytes, bist_seed,
                                    fault if e == 0 else "none", fault_at if e == 0 else 0)
                     for e in range(n)]
        self.chks = [PortTrafficCheck(n, e, bist_seed) for e in range(n)]
        members = dict(self.fabric.signature.members)
        #: The fabric's outputs passed through (``o_fec`` too with ``lane_profile="rs544"``).
        self.pass_out = PASS_OUT + (("o_fec",) if "o_fec" in members else ())
        sig = {k: members[k] for k in PASS_IN + self.pass_out}
        sig.update({
            "i_bist": In(BIST_CONTROL.layout()),
            "o_gen_messages": Out(COUNTER_BITS).array(n),
            "o_gen_beats": Out(COUNTER_BITS).array(n),
            "o_gen_done": Out(n),
            "o_gen_next_seq": Out(BIST_SEQ_BITS).array(n, n),
            "o_chk_messages": Out(COUNTER_BITS).array(n),
            "o_chk_beats": Out(COUNTER_BITS).array(n),
            "o_seq_errors": Out(COUNTER_BITS).array(n),
            "o_data_errors": Out(COUNTER_BITS).array(n),
            "o_unexpected": Out(COUNTER_BITS).array(n),
            "o_rsp_beats": Out(COUNTER_BITS).array(n),
            "o_chk_expected": Out(BIST_SEQ_BITS).array(n, n),
        })
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        n = self.n_endpoints
        m.submodules.fabric = fab = self.fabric
        for name in PASS_IN:
            connect(m, flipped(getattr(self, name)), getattr(fab, name))
        for name in self.pass_out:
            mine, theirs = getattr(self, name), getattr(fab, name)
            if isinstance(theirs, Signal) or not hasattr(theirs, "__len__"):
                m.d.comb += mine.eq(theirs)
            else:
                m.d.comb += [mine[k].eq(theirs[k]) for k in range(len(theirs))]
        ctl = self.i_bist
        for e in range(n):
            g, c = self.gens[e], self.chks[e]
            m.submodules[f"gen{e}"] = g
            m.submodules[f"chk{e}"] = c
            m.d.comb += [g.i_enable.eq(ctl.enable), g.i_budget.eq(ctl.budget),
                         g.i_load.eq(ctl.load), c.i_stall.eq(ctl.stall),
                         # idle response input: zeros, not X (Icarus, docs/fabric.md)
                         fab.i_rsp[e].valid.eq(0), fab.i_rsp[e].payload.eq(0),
                         self.o_gen_messages[e].eq(g.o_messages),
                         self.o_gen_beats[e].eq(g.o_beats),
                         self.o_gen_done[e].eq(g.o_done),
                         self.o_chk_messages[e].eq(c.o_messages),
                         self.o_chk_beats[e].eq(c.o_beats),
                         self.o_seq_errors[e].eq(c.o_seq_errors),
                         self.o_data_errors[e].eq(c.o_data_errors),
                         self.o_unexpected[e].eq(c.o_unexpected),
                         self.o_rsp_beats[e].eq(c.o_rsp_beats)]
            m.d.comb += [self.o_gen_next_seq[e][d].eq(g.o_next_seq[d]) for d in range(n)]
            m.d.comb += [self.o_chk_expected[e][s].eq(c.o_expected[s]) for s in range(n)]
            connect(m, g.o_req, fab.i_req[e])
            connect(m, fab.o_req[e], c.i_req)
            connect(m, fab.o_rsp[e], c.i_rsp)
        return m


def _build(**params):
    return FabricBist(**params)


def _block_params():
    from fusionfabric.rtl.fabric import BLOCKS as FABRIC_BLOCKS
    fabric = next(b for b in FABRIC_BLOCKS if b.name == "fabric")
    return [*fabric.params,
            Param("max_bytes", int, 256, "longest BIST message in bytes",
                  choices=PORT_LENGTHS),
            Param("bist_seed", int, 1, "seed of the BIST generators and checkers"),
            Param("fault", str, "none", "test only: planted fault in generator 0",
                  choices=PORT_FAULTS),
            Param("fault_at", int, 0, "test only: message index of the planted fault")]


BLOCKS = [
    Block("fabric-bist", _build, doc="The fabric with a seeded WRITE generator and a "
          "checker on every accelerator port, counters only (docs/bist.md)",
          params=_block_params(), ci_params={"n_endpoints": 2}),
]
