"""RS(544,514) decoder at line rate: syndromes, RiBM, Chien search and Forney, P symbols per
cycle (IEEE 802.3 cl. 91.5.3.3)."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.fec.chien import ChienForney
from fusionfabric.rtl.fec.gf import gf_mul, inverse_rom
from fusionfabric.rtl.hdl import popcount
from fusionfabric.rtl.fec.keyeq import RiBM
from fusionfabric.rtl.fec.layouts import (COUNT_BITS, SYMBOL_BITS, check_symbols_per_beat,
                                          dec_out_fields, in_fields)
from fusionfabric.rtl.fec.syndrome import Syndromes
from fusionfabric.formats import fec as code

__all__ = ["RsDecoder", "decoder_latency", "pick", "result_delay"]

SB, T, NPAR = SYMBOL_BITS, code.T, code.NPAR


def result_delay(bypass_correction: bool, pipeline: bool = False) -> int:
    """Cycles from a codeword's last input handshake until its result slot is done: the
    RiBM (:attr:`RiBM.LATENCY`), after the syndromes' register with ``pipeline``; or 1
    for the syndrome flag alone (``bypass_correction``)."""
    return 1 if bypass_correction else RiBM.LATENCY + int(pipeline)


def decoder_latency(n_beats: int, bypass_correction: bool, pipeline: bool = False) -> int:
    """:attr:`RsDecoder.latency` for ``n_beats = 544 / P``: the rest of the codeword's
    beats, :func:`result_delay`, then the output pipeline: buffer read, Chien and Forney,
    (with correction and ``pipeline``) the inverse ROM's output register, and the output
    register."""
    extra = int(pipeline and not bypass_correction)
    return n_beats - 1 + result_delay(bypass_correction, pipeline) + 3 + extra


def pick(sel, values):
    """``values[sel]`` as a Mux chain (no Array: Icarus leaves an Array lookup X when its
    index stays constant from time 0, docs/fabric.md)."""
    out = values[0]
    for i, v in enumerate(values[1:], start=1):
        out = Mux(sel == i, v, out)
    return out


class RsDecoder(wiring.Component):
    """RS(544,514) "KP4" decoder, ``P`` symbols per cycle, a new codeword every ``544 / P``
    cycles.

    The pipeline (IEEE 802.3 cl. 91.5.3.3 describes the function; the architecture is the
    classic syndrome / key equation / Chien-Forney split):

    1. :class:`~.syndrome.Syndromes`: P-parallel Horner over the input beats.
    2. ``n_solvers`` copies of :class:`~.keyeq.RiBM` (30 iterations, one per cycle),
       loaded in turn (round robin) at each codeword's last beat (with ``pipeline``: from
       the syndrome registers, in the cycle after): ``n_solvers = ceil(d / (544 / P))``
       with ``d = 32`` (33 with ``pipeline``), so that a solver is free again before its
       next turn at one codeword every ``544 / P`` cycles (1 for P <= 16, 2 for P = 17 and
       32, and 2 / 3 for P = 34, 4 / 5 for P = 68 without / with ``pipeline``).
    3. A delay buffer (``amaranth.lib.memory``, ``depth`` beats) that holds the received
       beats until their codeword's locator is ready.
    4. :class:`~.chien.ChienForney` over the beats read back, then one inverse ROM per
       symbol (block RAM; with ``pipeline`` its output is registered) and one general
       multiplier for the error value, and the correction.

    A received word is uncorrectable when its syndromes are not all zero and the number of
    roots of Lambda among the 544 positions differs from deg Lambda, or deg Lambda is 0
    (this also catches roots in the 479 implied zero symbols and repeated roots), as
    :func:`fusionfabric.sim.fec.decode` defines it.

    Throughput and lane configurations (10-bit symbols, 5,440 bits per codeword): one
    66-bit PCS lane per cycle needs ``P = 8`` (80 bits per cycle); 4 lanes of 66 bits (264
    bits per cycle, a codeword every 20.6 cycles) need ``P = 32`` (17 cycles per
    codeword); 8 lanes need ``P = 68``.

    Parameters
    ----------
    P : int
        Symbols per beat; must divide 544.
    bypass_correction : bool
        Detect and flag only (cl. 91.5.3.3 bypass correction): no key equation, Chien or
        Forney; ``uncorrectable`` means "syndromes not all zero", data passes unchanged.
        Saves 30 cycles of latency (``latency = 544 / P + 3``).
    bypass_indication : bool
        Correct, but never raise ``uncorrectable`` on the output (cl. 91.5.3.3 bypass
        indication); the ``o_uncorrectable`` counter still counts. No latency change: the
        flag rides on the last beat, which is not delayed for it.
    counter_width : int
        Width of the saturating counters (1..64).
    pipeline : bool
        Two more register stages for timing, 2 cycles more latency, the same throughput:
        the solvers load from the syndrome registers instead of the Horner step's output,
        and the inverse ROM's output is registered before the error-value multiplier (with
        correction; nothing changes with ``bypass_correction``). On ECP5 the decoder at
        P = 8 then closes above 100 MHz (docs/fec.md, "FPGA").

    Members
    -------
    i_data : In(stream.Signature(layouts.in_fields(P)))
        ``data`` (P symbols, position ``bP + k`` in symbol ``k`` of beat ``b``) and
        ``first``. The decoder counts ``544 / P`` beats from a ``first``, or from the
        beat after a codeword's last beat. Input ready rule: ``ready`` is low only when
        the delay buffer is full or when the next beat would end a codeword and the solver
        whose turn it is still holds an earlier result; neither happens while the output
        is taken at full rate (``ready`` stays high in steady state).
    o_data : Out(stream.Signature(layouts.dec_out_fields(P)))
        The corrected codeword, ``544 / P`` beats with ``first``/``last``; ``error`` is
        the per-position error strobe (bit ``k``: symbol ``k`` was changed), for per-lane
        error counts. On the ``last`` beat: ``corrected``, ``uncorrectable`` and
        ``n_corrected``. On an uncorrectable codeword the beats already carry the changes
        made at the roots found so far (the root count is known only at the last beat):
        the user drops the codeword on ``uncorrectable``.
    o_codewords, o_corrected_codewords, o_corrected_symbols, o_uncorrectable : Out(counter_width)
        Saturating counters of codewords output, codewords with at least one corrected
        symbol, corrected symbols, and uncorrectable codewords (counted at the handshake
        of each last beat).

    Timing
    ------
    Latency from the handshake of a codeword's first input beat to its first output beat
    (``valid`` high), at full rate: ``544 / P + 33`` cycles (``544 / P - 1`` more input
    beats, 31 cycles to the RiBM result, then read, Chien and Forney, output register:
    3 cycles), ``544 / P + 3`` with ``bypass_correction`` (the 31 cycles become 1).
    With ``pipeline`` and correction: ``544 / P + 35`` (the syndrome register before the
    solver and the inverse ROM's output register).
    Throughput: one beat per cycle in and out, a new codeword every ``544 / P`` cycles,
    with or without idle gaps on the input. The output pipeline stalls as a whole while
    ``o_data.ready`` is low (``advance = ~o_data.valid | o_data.ready``). Reset empties
    the buffer and the pipeline, frees the solvers and clears the counters.
    """

    def __init__(self, P: int = 8, bypass_correction: bool = False,
                 bypass_indication: bool = False, counter_width: int = 32,
                 pipeline: bool = False):
        self.P = check_symbols_per_beat(P)
        for name, v in (("bypass_correction", bypass_correction),
                        ("bypass_indication", bypass_indication), ("pipeline", pipeline)):
            if not isinstance(v, bool):
                raise TypeError(f"{name}={v!r} must be a bool")
        if isinstance(counter_width, bool) or not isinstance(counter_width, int) \
                or not 1 <= counter_width <= 64:
            raise ValueError(f"counter_width={counter_width!r} must be an int in 1..64")
        self.bypass_correction = bypass_correction
        self.bypass_indication = bypass_indication
        self.counter_width = counter_width
        self.pipeline = pipeline
        self.n_beats = code.N // self.P
        B = self.n_beats
        #: Cycles from a codeword's last input handshake until its result is ready.
        self.result_delay = result_delay(bypass_correction, pipeline)
        self.n_solvers = -(-(self.result_delay + 1) // B) if not bypass_correction else \
            max(2, -(-3 // B))
        self.depth = B + self.result_delay + 4
        #: First input beat to first output beat, in cycles (full rate).
        self.latency = decoder_latency(B, bypass_correction, pipeline)
        self.in_fields = in_fields(self.P)
        self.out_fields = dec_out_fields(self.P)
        cw = counter_width
        super().__init__({
            "i_data": In(stream.Signature(self.in_fields.layout())),
            "o_data": Out(stream.Signature(self.out_fields.layout())),
            "o_codewords": Out(cw), "o_corrected_codewords": Out(cw),
            "o_corrected_symbols": Out(cw), "o_uncorrectable": Out(cw)})

    def elaborate(self, platform):
        m = Module()
        P, B, n, D = self.P, self.n_beats, self.n_solvers, self.depth
        full = not self.bypass_correction
        beat = self.i_data.payload

        # ---- input side: buffer write, syndromes, solver loads --------------------------
        m.submodules.syndromes = synd = Syndromes(P)
        in_count = Signal(range(B))
        idx = Signal(range(B))
        in_last = Signal()
        take = Signal()
        wr_slot = Signal(range(n))
        wr_ptr = Signal(range(D))
        level = Signal(range(D + 1))
        busy = Signal(n)
        done = Signal(n)
        nz = Signal(n)
        # in_count == 0 kept as a register of its own (timing: the syndromes' restart is
        # the first thing on the path through the Horner step)
        at_zero = Signal(init=1)
        m.d.comb += [idx.eq(Mux(beat.first, 0, in_count)), in_last.eq(idx == B - 1),
                     self.i_data.ready.eq((level < D)
                                          & ~((in_count == B - 1) & pick(wr_slot, list(busy)))),
                     take.eq(self.i_data.valid & self.i_data.ready),
                     synd.i_data.eq(beat.data), synd.i_start.eq(beat.first | at_zero), synd.i_en.eq(take)]

        m.submodules.buffer = buf = memory.Memory(shape=SB * P, depth=D, init=[])
        wp = buf.write_port()
        rp = buf.read_port()
        m.d.comb += [wp.addr.eq(wr_ptr), wp.data.eq(beat.data), wp.en.eq(take)]
        load = Signal(n)
        with m.If(take):
            m.d.sync += [wr_ptr.eq(Mux(wr_ptr == D - 1, 0, wr_ptr + 1)),
                         in_count.eq(Mux(in_last, 0, idx + 1)), at_zero.eq(in_last)]
            with m.If(in_last):
                m.d.sync += wr_slot.eq(Mux(wr_slot == n - 1, 0, wr_slot + 1))
                for i in range(n):
                    m.d.comb += load[i].eq(wr_slot == i)
        s_nz = Signal()
        strobe, source = load, synd.o_next
        if full:
            # "syndromes not all zero" (and with ``pipeline`` the solver's load) from the
            # accumulators in the cycle after the last beat (timing: not behind the Horner
            # step); the flag is read when the slot's solver is done, 30 cycles later
            strobe, source = Signal(n), synd.o_syndromes
            m.d.sync += strobe.eq(load)
        s_load, s_synd = (strobe, source) if self.pipeline else (load, synd.o_next)
        m.d.comb += s_nz.eq(source != 0)
        for i in range(n):
            with m.If(strobe[i]):
                m.d.sync += nz[i].eq(s_nz)

        # ---- result slots: RiBM solvers, or the syndrome flag only ----------------------
        take_slot = Signal(n)
        lambdas, omegas, degs = [], [], []
        if full:
            for i in range(n):
                s = RiBM()
                m.submodules[f"ribm{i}"] = s
                m.d.comb += [s.i_load.eq(s_load[i]), s.i_syndromes.eq(s_synd),
                             s.i_take.eq(take_slot[i]), busy[i].eq(s.o_busy),
                             done[i].eq(s.o_done)]
                lambdas.append(s.o_lambda)
                omegas.append(s.o_omega)
                deg = Const(0, range(T + 1))
                for j in range(1, T + 1):
                    deg = Mux(s.o_lambda[SB * j:SB * (j + 1)] != 0, j, deg)
                degs.append(deg)
        else:
            for i in range(n):
                with m.If(load[i]):
                    m.d.sync += busy[i].eq(1)
                with m.Elif(take_slot[i]):
                    m.d.sync += busy[i].eq(0)
            m.d.comb += done.eq(busy)

        # ---- output side: read, Chien/Forney, correct --------------------------------------
        out = self.o_data.payload
        advance = Signal()
        m.d.comb += advance.eq(~self.o_data.valid | self.o_data.ready)
        rd_active = Signal()
        rd_count = Signal(range(B))
        rd_slot = Signal(range(n))
        rd_ptr = Signal(range(D))
        issue = Signal()
        first_issue = Signal()
        m.d.comb += [issue.eq(advance & (rd_active | pick(rd_slot, list(done)))),
                     first_issue.eq(issue & ~rd_active),
                     rp.addr.eq(rd_ptr), rp.en.eq(advance)]
        with m.If(issue):
            m.d.sync += [rd_ptr.eq(Mux(rd_ptr == D - 1, 0, rd_ptr + 1)),
                         rd_count.eq(Mux(rd_count == B - 1, 0, rd_count + 1)),
                         rd_active.eq(rd_count != B - 1)]
        with m.If(first_issue):
            m.d.sync += rd_slot.eq(Mux(rd_slot == n - 1, 0, rd_slot + 1))
            for i in range(n):
                m.d.comb += take_slot[i].eq(rd_slot == i)
        m.d.sync += level.eq(level + take - issue)

        cw_nz = Signal()
        cw_deg = Signal(range(T + 1))
        with m.If(first_issue):
            m.d.sync += cw_nz.eq(pick(rd_slot, list(nz)))
            if full:
                m.d.sync += cw_deg.eq(pick(rd_slot, degs))
        if full:
            m.submodules.chien = chien = ChienForney(P)
            m.d.comb += [chien.i_load.eq(first_issue), chien.i_step.eq(issue),
                         chien.i_lambda.eq(pick(rd_slot, lambdas)),
                         chien.i_omega.eq(pick(rd_slot, omegas))]

        s1_valid, s1_first, s1_last = Signal(), Signal(), Signal()
        s2_valid, s2_first, s2_last, s2_nz = Signal(), Signal(), Signal(), Signal()
        s2_deg = Signal(range(T + 1))
        s2_data = Signal(SB * P)
        s2_zero = Signal(P)
        s2_num, s2_nzden = Signal(SB * P), Signal(P)
        s2_inv = Signal(SB * P)     # 1/den, read from the inverse ROM at the s2 edge
        with m.If(advance):
            m.d.sync += [s1_valid.eq(issue), s1_first.eq(rd_count == 0),
                         s1_last.eq(rd_count == B - 1),
                         s2_valid.eq(s1_valid), s2_first.eq(s1_first), s2_last.eq(s1_last),
                         s2_nz.eq(cw_nz), s2_deg.eq(cw_deg), s2_data.eq(rp.data)]
            if full:
                m.d.sync += [s2_zero.eq(chien.o_zero), s2_num.eq(chien.o_num),
                             s2_nzden.eq(Cat(*[chien.o_den[SB * k:SB * (k + 1)] != 0
                                               for k in range(P)]))]

        # with correction and ``pipeline``, a stage s3 registers the inverse ROM's output
        # (block RAM; its clock-to-output and the error-value multiplier do not fit one
        # ECP5 cycle at 100 MHz together) with the s2 fields it belongs to; otherwise the
        # output register follows s2
        o_valid, o_first, o_last, o_nz, o_deg = s2_valid, s2_first, s2_last, s2_nz, s2_deg
        fixed = Signal(SB * P)
        changed = Signal(P)
        n_zero, n_changed = popcount(s2_zero), popcount(changed)
        if full:
            # The ROM is read synchronously with the s2 registers' enable (block RAM; the
            # same value as a registered den looked up combinationally), and whether a
            # symbol changes is decided from registers: e = num / den is nonzero exactly
            # when num and den are (a field has no zero divisors), so the count of
            # corrected symbols does not wait for the ROM and the multiplier (timing).
            m.submodules.inverse = rom = inverse_rom()
            hit = Signal(P)
            for k in range(P):
                port = rom.read_port(domain="sync")
                sl = slice(SB * k, SB * (k + 1))
                m.d.comb += [port.addr.eq(chien.o_den[sl]), port.en.eq(advance),
                             s2_inv[sl].eq(port.data),
                             hit[k].eq(s2_zero[k] & (s2_num[sl] != 0) & s2_nzden[k])]
            if self.pipeline:
                s3_valid, s3_first, s3_last, s3_nz = Signal(), Signal(), Signal(), Signal()
                s3_deg = Signal(range(T + 1))
                s3_data, s3_num, s3_inv = Signal(SB * P), Signal(SB * P), Signal(SB * P)
                s3_hit = Signal(P)
                n_zero = Signal(range(P + 1))
                n_changed = Signal(range(P + 1))
                with m.If(advance):
                    m.d.sync += [s3_valid.eq(s2_valid), s3_first.eq(s2_first),
                                 s3_last.eq(s2_last), s3_nz.eq(s2_nz), s3_deg.eq(s2_deg),
                                 s3_data.eq(s2_data), s3_num.eq(s2_num), s3_inv.eq(s2_inv),
                                 s3_hit.eq(hit),
                                 n_zero.eq(popcount(s2_zero)), n_changed.eq(popcount(hit))]
                o_valid, o_first, o_last = s3_valid, s3_first, s3_last
                o_nz, o_deg = s3_nz, s3_deg
                e_data, e_num, e_inv, e_hit = s3_data, s3_num, s3_inv, s3_hit
            else:
                e_data, e_num, e_inv, e_hit = s2_data, s2_num, s2_inv, hit
            for k in range(P):
                sl = slice(SB * k, SB * (k + 1))
                e = gf_mul(m, e_num[sl], e_inv[sl], name=f"err{k}")
                m.d.comb += [fixed[sl].eq(e_data[sl] ^ Mux(e_hit[k], e, 0)),
                             changed[k].eq(e_hit[k])]
        else:
            m.d.comb += fixed.eq(s2_data)

        roots = Signal(range(code.N + 1))
        fixes = Signal(range(code.N + 1))
        roots_next = Signal(range(code.N + 1))
        fixes_next = Signal(range(code.N + 1))
        uncorr = Signal()
        m.d.comb += roots_next.eq(Mux(o_first, 0, roots) + n_zero)
        m.d.comb += fixes_next.eq(Mux(o_first, 0, fixes) + n_changed)
        if full:
            m.d.comb += uncorr.eq(o_nz & ((roots_next != o_deg) | (o_deg == 0)))
        else:
            m.d.comb += uncorr.eq(o_nz)
        raw_uncorr = Signal()
        with m.If(advance):
            m.d.sync += self.o_data.valid.eq(o_valid)
            with m.If(o_valid):
                m.d.sync += [roots.eq(roots_next), fixes.eq(fixes_next),
                             out.data.eq(fixed), out.error.eq(changed),
                             out.first.eq(o_first), out.last.eq(o_last),
                             raw_uncorr.eq(o_last & uncorr),
                             out.uncorrectable.eq(
                                 o_last & uncorr & (not self.bypass_indication)),
                             out.corrected.eq(o_last & ~uncorr & (fixes_next != 0)),
                             out.n_corrected.eq(Mux(o_last & ~uncorr, fixes_next, 0))]

        # ---- counters ----------------------------------------------------------------------
        top = (1 << self.counter_width) - 1
        done_cw = Signal()
        m.d.comb += done_cw.eq(self.o_data.valid & self.o_data.ready & out.last)

        def bump(counter, amount, cond):
            total = Signal(self.counter_width + COUNT_BITS + 1, name=f"{counter.name}_sum")
            m.d.comb += total.eq(counter + amount)
            with m.If(done_cw & cond):
                m.d.sync += counter.eq(Mux(total > top, top, total))

        bump(self.o_codewords, 1, 1)
        bump(self.o_corrected_codewords, 1, out.corrected)
        bump(self.o_corrected_symbols, out.n_corrected, 1)
        bump(self.o_uncorrectable, 1, raw_uncorr)
        return m
