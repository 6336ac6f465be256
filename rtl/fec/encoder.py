"""RS(544,514) systematic encoder, ``P`` symbols per cycle (IEEE 802.3 cl. 91.5.2.7)."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.fec.gf import linear_matrix, mul
from fusionfabric.rtl.fec.layouts import (SYMBOL_BITS, check_symbols_per_beat, enc_out_fields,
                                          in_fields)
from fusionfabric.rtl.hdl import gf2_product
from fusionfabric.formats import fec as code

__all__ = ["RsEncoder", "lfsr_step"]


def lfsr_step(state: list[int], symbols: list[int]) -> list[int]:
    """The division register of cl. 91 Figure 91-6 after shifting in ``symbols``.

    ``state[0]`` is the x^29 coefficient of the running remainder (the first parity symbol
    once the message is in); the generator is ``formats.fec.GENERATOR``.
    """
    g = [int(c) for c in code.GENERATOR]
    s = list(state)
    for u in symbols:
        fb = int(u) ^ s[0]
        s = [s[i + 1] ^ mul(fb, g[i + 1]) for i in range(code.NPAR - 1)] \
            + [mul(fb, g[code.NPAR])]
    return s


class RsEncoder(wiring.Component):
    """Systematic RS(544,514) encoder over GF(2^10), ``P`` symbols per beat, at line rate.

    A codeword is ``544 / P`` beats (layout: :mod:`fusionfabric.rtl.fec.layouts`). The
    input carries the whole codeword frame: the 514 message symbols in positions 0..513
    and any value in positions 514..543, which the encoder overwrites with the parity
    p(x) = m(x) x^30 mod g(x), g(x) = prod_{i=0}^{29} (x - alpha^i) (cl. 91.5.2.7;
    generator and field from :mod:`fusionfabric.formats.fec`). When 514 is not a multiple of
    ``P``, the beat holding position 513 carries ``514 mod P`` message symbols followed by
    the first parity symbols. The division register advances ``P`` symbols per beat,
    x' = A x + C u, the GF(2) matrices probed from :func:`lfsr_step`, the division step, and
    built as balanced XOR trees; the first beat's gate acts after the trees of A, so the loop
    is those trees and one gate. A second pair gives the remainder after the short last
    message beat, whose later parity symbols leave from a register shifted ``P`` symbols a
    beat (docs/fec.md, "Encoder").

    ``P`` and line rates at 10 bits per symbol: one codeword is 5,440 bits. A 66-bit PCS
    word per cycle (one lane) needs ``P = 8`` (80 bits per cycle, 68 cycles per codeword);
    4 lanes of 66 bits (264 bits per cycle, a codeword every 20.6 cycles) need ``P = 32``
    (17 cycles per codeword); 8 lanes (528 bits) need ``P = 68`` (8 cycles).

    Parameters
    ----------
    P : int
        Symbols per beat; must divide 544 (1, 2, 4, 8, 16, 17, 32, 34, 68, 136, 272, 544).

    Members
    -------
    i_data : In(stream.Signature(layouts.in_fields(P)))
        ``data`` (P symbols) and ``first``: the first beat of a codeword. The encoder
        counts ``544 / P`` beats from a ``first``; a ``first`` in mid-codeword starts a new
        codeword (the partial one is output as it stands, with no valid parity).
    o_data : Out(stream.Signature(layouts.enc_out_fields(P)))
        The codeword: ``data`` with the parity filled in, ``first`` and ``last``.

    Timing
    ------
    Latency 1 cycle (each beat leaves one cycle after its handshake); one beat per cycle,
    so a new codeword every ``544 / P`` cycles with no stall.
    ``i_data.ready = ~o_data.valid | o_data.ready``. Reset empties the output register and
    restarts the beat count.
    """

    def __init__(self, P: int = 8):
        self.P = check_symbols_per_beat(P)
        self.n_beats = code.N // self.P
        #: Beat holding the last message symbol (position 513), and its message symbols.
        self.last_msg_beat = (code.K - 1) // self.P
        self.n_msg_last = code.K - self.last_msg_beat * self.P
        super().__init__({"i_data": In(stream.Signature(in_fields(self.P).layout())),
                          "o_data": Out(stream.Signature(enc_out_fields(self.P).layout()))})

    def elaborate(self, platform):
        m = Module()
        P, B, L, sb, np_ = self.P, self.n_beats, self.last_msg_beat, SYMBOL_BITS, code.NPAR
        n = self.n_msg_last
        h = P - n                   # parity symbols in beat L (after its n message symbols)
        R = np_ - h                 # parity symbols in beats L+1 .. B-1 (a multiple of P)
        beat = self.i_data.payload
        take = Signal()
        m.d.comb += [self.i_data.ready.eq(~self.o_data.valid | self.o_data.ready),
                     take.eq(self.i_data.valid & self.i_data.ready)]

        # Beat count, and registered flags of it, so that a beat's role costs one gate with
        # ``first`` rather than a compare of the count.
        count = Signal(range(B), init=0)
        at0 = Signal(init=1)                    # count == 0
        at_l = Signal(init=int(L == 0))         # count == L
        after_l = Signal()                      # L < count
        at_end = Signal(init=int(B == 1))       # count == B - 1
        idx = Signal(range(B))
        m.d.comb += idx.eq(Mux(beat.first, 0, count))
        is0, is_l, is_par, is_end = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [is0.eq(beat.first | at0),
                     is_l.eq(is0 if L == 0 else ~beat.first & at_l),
                     is_par.eq(~beat.first & after_l),
                     is_end.eq(beat.first | at_end if B == 1 else ~beat.first & at_end)]
        with m.If(take):
            m.d.sync += [count.eq(Mux(is_end, 0, idx + 1)),
                         at0.eq(is_end),
                         at_l.eq(is_end if L == 0 else idx == L - 1),
                         after_l.eq((is_l | is_par) & ~is_end),
                         at_end.eq(1 if B == 1 else idx == B - 2)]

        # Division step over P symbols: x' = A x + C u (x the register, u the beat's symbols),
        # the register's share forced to 0 on the first beat after its XOR trees, so that
        # the loop is the trees of A (at most 53 inputs a bit at P = 8) and one gate.
        def split(n_sym, name):
            mat = linear_matrix(lambda v: lfsr_step(v[:np_], v[np_:]), np_ + n_sym)
            return (gf2_product(m, (mat[:, :sb * np_], state), name=f"{name}_s"),
                    gf2_product(m, (mat[:, sb * np_:], beat.data[:sb * n_sym]),
                                name=f"{name}_u"))

        state = Signal(sb * np_)
        full_s, full_u = split(P, "lfsr_full")
        with m.If(take):
            m.d.sync += state.eq(Mux(is0, 0, full_s) ^ full_u)

        # The remainder after the beat holding position 513 (its n message symbols): no
        # gate needed, as that beat is never a first beat unless it is beat 0 (L = 0).
        if n == P:
            rem_s, rem_u = full_s, full_u
        else:
            rem_s, rem_u = split(n, "lfsr_last")
        rem = Signal(sb * np_)
        m.d.comb += rem.eq(rem_u if L == 0 else rem_s ^ rem_u)

        # Parity symbols h .. 29, for the beats after L: loaded in beat L, then shifted down
        # by P symbols a beat, so that beat L + j takes symbols 0 .. P-1 of the register.
        parity = Signal(sb * R)
        if R:
            with m.If(take):
                with m.If(is_l):
                    m.d.sync += parity.eq(rem[sb * h:])
                with m.Elif(is_par):
                    m.d.sync += parity.eq(parity[sb * P:])

        out_syms = []
        for k in range(P):
            sym = Signal(sb, name=f"sym{k}")
            # A Mux chain, not a Switch: no combinational process for Icarus to leave X
            # (docs/fabric.md, "Icarus note").
            value = beat.data[sb * k:sb * (k + 1)]
            if R:
                value = Mux(is_par, parity[sb * k:sb * (k + 1)], value)
            if k >= n:
                value = Mux(is_l, rem[sb * (k - n):sb * (k - n + 1)], value)
            m.d.comb += sym.eq(value)
            out_syms.append(sym)

        out = self.o_data.payload
        with m.If(self.i_data.ready):
            m.d.sync += self.o_data.valid.eq(self.i_data.valid)
            with m.If(self.i_data.valid):
                m.d.sync += [out.data.eq(Cat(*out_syms)), out.first.eq(is0),
                             out.last.eq(is_end)]
        return m
