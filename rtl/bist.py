"""Built-in self-test: a seeded traffic generator and a checker on the switch port flit.

Both speak ``fusionfabric.formats.switch.switch_flit(data_width)`` over ``lib.stream`` and expose their
counters as plain output ports, so an FPGA design or a cocotb test only configures,
starts and reads counters: no per-cycle software. Formats and parameters are declared in
:mod:`fusionfabric.formats.bist`. The LFSR and filler XOR networks are derived here from the
PRBS31 recurrence (:func:`advance_matrix`, :func:`filler_matrix`); the numpy model
:mod:`fusionfabric.sim.bist` keeps its own bit-serial reference and models both blocks bit for
bit (its module docstring states the signature function and the checker's counting rules).
"""

from __future__ import annotations

import numpy as np
from amaranth import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.blocks import Block, Param
from fusionfabric.formats.bist import (BEAT_BITS, BIST_SEQ_BITS, FILL_SALT, FILL_WARMUP,
                                      LFSR_ORDER, LFSR_TAP, PATTERNS, SIG_BITS, SIGNATURE,
                                      check_params,
                                      check_port_params, check_seed, check_width, seed_state)
from fusionfabric.formats.switch import Kind, switch_flit
from fusionfabric.rtl.hdl import (eq, gf2_apply_int, gf2_matmul, gf2_product, sat_inc,
                                  shift_register_matrices)

__all__ = ["TrafficGen", "TrafficCheck", "advance_matrix", "filler_matrix", "make_data",
           "start_gate", "lfsr_advance", "COUNTER_BITS", "BLOCKS"]

COUNTER_BITS = 32


def advance_matrix(k: int):
    """The 31×31 GF(2) matrix of ``k`` steps of the PRBS31 LFSR (x^31 + x^28 + 1, state bit
    0 the newest bit): ``state_after = A @ state``, from the shift-register recurrence."""
    return shift_register_matrices(LFSR_ORDER, (LFSR_ORDER, LFSR_TAP), k, xor_input=False)[2]


def filler_matrix(data_width: int):
    """``(M, c)``: the filler above the signature is ``M @ sig ^ c`` over GF(2).

    The filler LFSR is seeded with ``(sig ^ (sig >> 31) ^ FILL_SALT) mod 2**31`` (a linear
    map ``P`` plus a constant), runs ``FILL_WARMUP`` steps (``A``), then emits
    ``data_width - 40`` bits (``O``): ``M = O A P`` and ``c = O A FILL_SALT``.
    """
    check_width(data_width)
    n = data_width - SIG_BITS
    p = np.zeros((LFSR_ORDER, SIG_BITS), dtype=np.uint8)
    for i in range(LFSR_ORDER):
        p[i, i] = 1
        if i + LFSR_ORDER < SIG_BITS:
            p[i, i + LFSR_ORDER] = 1
    if not n:
        return np.zeros((0, SIG_BITS), dtype=np.uint8), 0
    out = shift_register_matrices(LFSR_ORDER, (LFSR_ORDER, LFSR_TAP), n, xor_input=False)[0]
    oa = gf2_matmul(out, advance_matrix(FILL_WARMUP))
    return gf2_matmul(oa, p), gf2_apply_int(oa, FILL_SALT)


def make_data(m: Module, data_width: int, src: Value, dest: Value, seq: Value,
              beat: Value, name: str = "sig") -> Value:
    """The ``data`` word of :func:`fusionfabric.sim.bist.make_data` as combinational logic in
    ``m``: the :data:`~fusionfabric.formats.bist.SIGNATURE` (a View of its layout) and the
    filler ``M @ sig ^ c`` above it."""
    sig = Signal(SIGNATURE.layout(), name=name)
    m.d.comb += [sig.beat.eq(beat), sig.seq.eq(seq), sig.dest.eq(dest), sig.src.eq(src)]
    mat, c = filler_matrix(data_width)
    if not mat.shape[0]:
        return sig.as_value()
    return Cat(sig.as_value(), gf2_product(m, (mat, sig.as_value()), const=c, name=f"{name}_fill"))


def start_gate(m: Module, *, active: Value, done_now: Value, enable: Value, budget: Value,
               load: Value, draw: Value, started: Signal) -> Signal:
    """The load/budget/enable scheduler shared by the switch-port and accelerator-port
    generators: returns ``go``, high in a cycle where a new packet (message) starts.

    The generator is free when idle or when its last beat is accepted (``done_now``); it
    starts iff free, ``enable``, the ``budget`` (0: none) not used up by ``started``, and the
    8-bit LFSR ``draw`` < ``load`` (``load`` 0..256; 256 always). Counts ``started`` on ``go``.
    """
    free = ~active | done_now
    budget_ok = ~budget.any() | (started < budget)
    hit = load[8] | (draw < load[:8])
    go = Signal()
    m.d.comb += go.eq(free & enable & budget_ok & hit)
    with m.If(go):
        m.d.sync += started.eq(started + 1)
    return go


def lfsr_advance(m: Module, reg: Signal, matrix, name: str) -> Value:
    """The state of LFSR register ``reg`` after the steps of ``matrix`` (an XOR network)."""
    return gf2_product(m, (matrix, reg), name=name)


class TrafficGen(wiring.Component):
    """Seeded packet generator for a switch port (block ``bist-gen``).

    Emits UNICAST packets of 1 .. ``max_len`` flits to destinations chosen uniformly at
    random or by a fixed permutation, with a per-destination sequence number and a data
    signature (source, destination, sequence, beat + LFSR filler, see :mod:`fusionfabric.sim.bist`)
    that :class:`TrafficCheck` verifies. The flit sequence is that of
    :class:`fusionfabric.sim.bist.TrafficGenModel`, independent of load and backpressure.

    Parameters
    ----------
    data_width : int
        Bits of ``data`` per flit, >= 40 (the signature).
    n_ports : int
        Switch ports (destinations 0 .. n_ports-1), 1 .. 256.
    port : int
        This generator's own port (source id in the signature).
    max_len : int
        Longest packet in flits, 1 .. 256; lengths are uniform-ish in 1 .. max_len.
    pattern : str
        ``"uniform"`` (random destination, may be ``port`` itself) or ``"permutation"``
        (always ``(port + offset) % n_ports``).
    offset : int
        Permutation offset, 0 .. n_ports-1.
    seed : int
        32-bit seed of the packet LFSR and the load LFSR.

    Members
    -------
    o_flit : Out(stream.Signature(switch_flit(data_width)))
        The packets.
    i_enable : In(1)
        Start new packets while high; a packet already started always completes.
    i_budget : In(32)
        Packets to start in total since reset (0: no limit).
    i_load : In(9)
        Offered load: when free, a packet starts in a cycle with probability i_load/256
        (256: back to back, line rate).
    o_packets, o_flits : Out(32)
        Packets and flits handed over (handshakes; packets counted on ``last``), wrapping.
    o_started : Out(32)
        Packets started (what the budget counts).
    o_done : Out(1)
        ``i_budget != 0``, the budget is used up and the last packet has left.
    o_next_seq : Out(16).array(n_ports)
        Per destination, the sequence number of the next packet (= packets started to it,
        mod 2**16).

    Timing
    ------
    A packet decided in cycle t (generator free, ``i_enable``, budget left, load draw) has
    its first flit valid in cycle t+1; the generator is free again in the cycle its last
    flit is accepted, so at ``i_load = 256`` packets follow back to back with no idle
    cycle (one flit per cycle). ``valid`` never depends on ``ready`` (lib.stream rules).
    Counters update the cycle after the handshake. Reset (synchronous) restarts both
    LFSRs from their seeds and clears the sequence table and counters.
    """

    def __init__(self, data_width: int = 64, n_ports: int = 4, port: int = 0,
                 max_len: int = 4, pattern: str = "uniform", offset: int = 1,
                 seed: int = 1):
        check_params(data_width, n_ports, port, max_len, pattern, offset, seed)
        self.data_width, self.n_ports, self.port = data_width, n_ports, port
        self.max_len, self.pattern, self.offset, self.seed = max_len, pattern, offset, seed
        self.flit_layout = switch_flit(data_width).layout()
        super().__init__({
            "o_flit": Out(stream.Signature(self.flit_layout)),
            "i_enable": In(1),
            "i_budget": In(COUNTER_BITS),
            "i_load": In(9),
            "o_packets": Out(COUNTER_BITS),
            "o_flits": Out(COUNTER_BITS),
            "o_started": Out(COUNTER_BITS),
            "o_done": Out(1),
            "o_next_seq": Out(BIST_SEQ_BITS).array(n_ports),
        })

    def elaborate(self, platform):
        m = Module()
        a31, a8 = advance_matrix(LFSR_ORDER), advance_matrix(8)

        # Packet LFSR: holds r_k, the draw of the next packet (sim.bist docstring).
        pkt_r = Signal(LFSR_ORDER, init=gf2_apply_int(a31, seed_state(self.seed, self.port, 0)))
        # Load LFSR: advances by 8 bits every cycle; cycle t uses the state after t+1.
        load_r = Signal(LFSR_ORDER, init=gf2_apply_int(a8, seed_state(self.seed, self.port, 1)))
        m.d.sync += load_r.eq(lfsr_advance(m, load_r, a8, "load_next"))

        if self.pattern == "uniform":
            next_dest = (pkt_r[:16] * self.n_ports)[16:]
        else:
            next_dest = Const((self.port + self.offset) % self.n_ports, 8)
        next_last = (pkt_r[16:24] * self.max_len)[8:16]      # length - 1

        seqs = Array(Signal(BIST_SEQ_BITS, name=f"next_seq{i}") for i in range(self.n_ports))
        for i in range(self.n_ports):
            m.d.comb += self.o_next_seq[i].eq(seqs[i])

        active = Signal()
        dest = Signal(8)
        last_beat = Signal(BEAT_BITS)       # packet length - 1
        beat = Signal(BEAT_BITS)
        seq = Signal(BIST_SEQ_BITS)
        started = Signal(COUNTER_BITS)

        o = self.o_flit
        accept = Signal()
        is_last = Signal()
        m.d.comb += [
            accept.eq(o.valid & o.ready),
            is_last.eq(beat == last_beat),
            o.valid.eq(active),
            o.payload.data.eq(make_data(m, self.data_width, Const(self.port, 8), dest, seq, beat)),
            o.payload.first.eq(~beat.any()),
            o.payload.last.eq(is_last),
            o.payload.kind.eq(Kind.UNICAST),
            o.payload.dest.eq(dest),
            o.payload.src.eq(self.port),
            o.payload.chunk.eq(0),
            self.o_started.eq(started),
            self.o_done.eq(self.i_budget.any() & (started >= self.i_budget) & ~active),
        ]

        go = start_gate(m, active=active, done_now=accept & is_last, enable=self.i_enable,
                        budget=self.i_budget, load=self.i_load, draw=load_r[:8], started=started)

        with m.If(go):
            m.d.sync += [
                active.eq(1), dest.eq(next_dest), last_beat.eq(next_last), beat.eq(0),
                seq.eq(seqs[next_dest]), seqs[next_dest].eq(seqs[next_dest] + 1),
                pkt_r.eq(lfsr_advance(m, pkt_r, a31, "pkt_next")),
            ]
        with m.Elif(accept & is_last):
            m.d.sync += active.eq(0)
        with m.Elif(accept):
            m.d.sync += beat.eq(beat + 1)
        with m.If(accept):
            m.d.sync += self.o_flits.eq(self.o_flits + 1)
            with m.If(is_last):
                m.d.sync += self.o_packets.eq(self.o_packets + 1)
        return m


class TrafficCheck(wiring.Component):
    """Checker of :class:`TrafficGen` traffic arriving at one switch output (``bist-check``).

    Checks framing (``first``/``last``), the full data word of every flit against the
    signature recomputed from the flit's ``src``, this ``port``, the packet's sequence
    number and the beat index, and, per source, that sequence numbers follow each other
    by exactly one (exactly once, in order, per (source, destination)). The counting
    rules are those of :class:`fusionfabric.sim.bist.TrafficCheckModel` (one dropped or duplicated
    packet = one sequence error, a flipped bit = one data error, a lost ``first`` or
    ``last`` = one framing error).

    Parameters
    ----------
    data_width : int
        Bits of ``data`` per flit, >= 40.
    n_ports : int
        Switch ports = sources tracked, 1 .. 256.
    port : int
        This checker's port: the destination every flit must carry.
    seed : int
        32-bit seed of the backpressure LFSR.

    Members
    -------
    i_flit : In(stream.Signature(switch_flit(data_width)))
        The traffic to check.
    i_stall : In(8)
        Backpressure: ``ready`` is low in a cycle with probability i_stall/256 (LFSR draw,
        8 fresh bits per cycle); 0 = always ready.
    o_packets, o_flits : Out(32)
        Packets (starts) and flits received, wrapping.
    o_seq_errors, o_data_errors, o_framing_errors : Out(32)
        Error counters, saturating at 2**32-1.
    o_expected : Out(16).array(n_ports)
        Per source, the sequence number expected next (= packets received from it when no
        error happened).

    Timing
    ------
    Three stages: a flit accepted in cycle t is registered, compared in cycle t+1 (framing
    state, recomputed data word), counted in cycle t+2, and shows in the counters and
    ``o_expected`` from cycle **t+3**. One flit per cycle (``i_stall`` = 0: ``ready``
    always high). Reset (synchronous) clears counters and the table (every
    source expects 0) and restarts the backpressure LFSR.
    """

    def __init__(self, data_width: int = 64, n_ports: int = 4, port: int = 0, seed: int = 1):
        check_port_params(data_width, n_ports, port)
        check_seed(seed)
        self.data_width, self.n_ports, self.port, self.seed = data_width, n_ports, port, seed
        self.flit_layout = switch_flit(data_width).layout()
        super().__init__({
            "i_flit": In(stream.Signature(self.flit_layout)),
            "i_stall": In(8),
            "o_packets": Out(COUNTER_BITS),
            "o_flits": Out(COUNTER_BITS),
            "o_seq_errors": Out(COUNTER_BITS),
            "o_data_errors": Out(COUNTER_BITS),
            "o_framing_errors": Out(COUNTER_BITS),
            "o_expected": Out(BIST_SEQ_BITS).array(n_ports),
        })

    def elaborate(self, platform):
        m = Module()
        a8 = advance_matrix(8)
        stall_r = Signal(LFSR_ORDER,
                         init=gf2_apply_int(a8, seed_state(self.seed, self.port, 2)))
        m.d.sync += stall_r.eq(lfsr_advance(m, stall_r, a8, "stall_next"))
        i = self.i_flit
        m.d.comb += i.ready.eq(~(stall_r[:8] < self.i_stall))

        # Stage 1: registered flit.
        r_valid = Signal()
        r = Signal(self.flit_layout)
        m.d.sync += r_valid.eq(i.valid & i.ready)
        with m.If(i.valid & i.ready):
            m.d.sync += r.eq(i.payload)

        expected = Array(Signal(BIST_SEQ_BITS, name=f"expected{k}") for k in range(self.n_ports))
        for k in range(self.n_ports):
            m.d.comb += self.o_expected[k].eq(expected[k])
        in_pkt = Signal()
        beat = Signal(BEAT_BITS)
        pkt_seq = Signal(BIST_SEQ_BITS)

        starts = Signal()
        beat_now = Signal(BEAT_BITS)
        seq_now = Signal(BIST_SEQ_BITS)
        src_ok = Signal()
        good = Signal()
        want = make_data(m, self.data_width, r.src, Const(self.port, 8), seq_now, beat_now)
        m.d.comb += [
            starts.eq(r.first | ~in_pkt),
            beat_now.eq(Mux(starts, 0, beat + 1)),
            seq_now.eq(Mux(starts, r.data[BEAT_BITS:BEAT_BITS + BIST_SEQ_BITS], pkt_seq)),
            src_ok.eq(r.src < self.n_ports),
            good.eq(src_ok & eq(r.kind, Kind.UNICAST) & eq(r.dest, self.port)
                    & (r.data == want)),
        ]

        # Stage 2 (cycle t+1): framing state and the data comparison, registered.
        c_valid, c_frame, c_good, c_starts, c_src_ok = (Signal(name=f"c_{k}") for k in
                                                        ("valid", "frame", "good", "starts",
                                                         "src_ok"))
        c_seq = Signal(BIST_SEQ_BITS)
        c_src = Signal(8)
        m.d.sync += [c_valid.eq(r_valid), c_frame.eq(r.first == in_pkt), c_good.eq(good),
                     c_starts.eq(starts), c_src_ok.eq(src_ok), c_seq.eq(seq_now),
                     c_src.eq(r.src)]
        with m.If(r_valid):
            m.d.sync += [in_pkt.eq(~r.last), beat.eq(beat_now)]
            with m.If(starts):
                m.d.sync += pkt_seq.eq(seq_now)

        # Stage 3 (cycle t+2): counters and the per-source table.
        with m.If(c_valid):
            m.d.sync += self.o_flits.eq(self.o_flits + 1)
            with m.If(c_frame):
                sat_inc(m, self.o_framing_errors)
            with m.If(~c_good):
                sat_inc(m, self.o_data_errors)
            with m.If(c_starts):
                m.d.sync += self.o_packets.eq(self.o_packets + 1)
                with m.If(c_src_ok):
                    exp = expected[c_src]
                    with m.If(c_good):
                        with m.If(c_seq != exp):
                            sat_inc(m, self.o_seq_errors)
                        m.d.sync += exp.eq(c_seq + 1)
                    with m.Else():
                        m.d.sync += exp.eq(exp + 1)
        return m


BLOCKS = [
    Block("bist-gen", TrafficGen, doc="BIST traffic generator (seeded LFSR packets with "
          "per-destination sequence numbers and a data signature) for a switch port",
          params=[
              Param("data_width", int, 64, "bits of data per flit (>= 40)"),
              Param("n_ports", int, 4, "switch ports (destinations)"),
              Param("port", int, 0, "this generator's port (source id)"),
              Param("max_len", int, 4, "longest packet in flits (1..256)"),
              Param("pattern", str, "uniform", "destination choice", choices=PATTERNS),
              Param("offset", int, 1, "permutation offset (pattern=permutation)"),
              Param("seed", int, 1, "32-bit LFSR seed"),
          ]),
    Block("bist-check", TrafficCheck, doc="BIST traffic checker (sequence, data signature "
          "and framing checks with error counters) for a switch port",
          params=[
              Param("data_width", int, 64, "bits of data per flit (>= 40)"),
              Param("n_ports", int, 4, "switch ports (sources tracked)"),
              Param("port", int, 0, "this checker's port (expected destination)"),
              Param("seed", int, 1, "32-bit seed of the backpressure LFSR"),
          ]),
]
