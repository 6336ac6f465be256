"""Self-synchronizing scrambler and descrambler, any width and polynomial (IEEE 802.3 cl. 49).

The per-cycle XOR equations are generated from the shift register recurrence
(:func:`fusionfabric.rtl.hdl.shift_register_matrices`), never typed in.
"""

from __future__ import annotations

from amaranth import Module, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.blocks import Block, Param
from fusionfabric.formats.primitives import POLY_CL49, poly_taps
from fusionfabric.rtl.hdl import gf2_product, shift_register_matrices

__all__ = ["Scrambler", "Descrambler", "scrambler_step", "BLOCKS"]


def scrambler_step(m: Module, state: Value, data: Value, data_width: int,
                   polynomial: int = POLY_CL49, descrambler: bool = False
                   ) -> tuple[Signal, Signal]:
    """Combinational ``(out, next_state)`` of one ``data_width``-bit cycle, driven in ``m``.

    For designs that embed the scrambler in their own datapath (e.g. the 64 payload bits of
    a 66-bit block): register ``next_state`` where a word is taken.
    """
    n, taps = poly_taps(polynomial)
    os_, od, ns, nd = shift_register_matrices(n, taps, data_width,
                                              shift_in="in" if descrambler else "out")
    return (gf2_product(m, (os_, state), (od, data), name="scrambled"),
            gf2_product(m, (ns, state), (nd, data), name="next_state"))


class Scrambler(wiring.Component):
    """Self-synchronizing scrambler over ``data_width`` bits per cycle (IEEE 802.3 cl. 49.2.6).

    For each bit in transmission order (bit 0 of the word first):
    ``out = in ^ XOR(s[k-1] for each tap k)``, then ``out`` is shifted into ``s[0]``. The
    default polynomial 1 + x^39 + x^58 gives ``out = in ^ s[38] ^ s[57]``.

    Parameters
    ----------
    data_width : int
        Bits per word, any positive width (66 works as well as 64).
    polynomial : int
        Bit k set for each term x^k; must include 1. Default ``POLY_CL49``
        (``0x400008000000001``).
    init : int
        State after reset (``state_width`` bits; bit k is ``s[k]``).

    Members
    -------
    i_data : In(stream.Signature(data_width))
        Plain words.
    o_data : Out(stream.Signature(data_width))
        Scrambled words.

    Attributes
    ----------
    state_width : int
        Degree of the polynomial (58 by default).
    taps : tuple of int
        Exponents of the non-constant terms (``(39, 58)`` by default).

    Timing
    ------
    Latency 1 cycle from an ``i_data`` handshake to ``o_data.valid``; one word per cycle
    (``i_data.ready = ~o_data.valid | o_data.ready``). The state advances only on an input
    handshake, so idle cycles do not disturb the stream. Reset loads ``init`` and empties the
    output register.
    """

    descrambler = False

    def __init__(self, data_width: int = 64, polynomial: int = POLY_CL49, init: int = 0):
        if not isinstance(data_width, int) or data_width < 1:
            raise ValueError(f"data_width={data_width!r} must be a positive integer")
        self.state_width, self.taps = poly_taps(polynomial)
        if not isinstance(init, int) or not 0 <= init < (1 << self.state_width):
            raise ValueError(f"init={init!r} does not fit in {self.state_width} bits")
        self.data_width = data_width
        self.polynomial = polynomial
        self.init = init
        super().__init__({"i_data": In(stream.Signature(data_width)),
                          "o_data": Out(stream.Signature(data_width))})

    def elaborate(self, platform):
        m = Module()
        state = Signal(self.state_width, init=self.init)
        out, nxt = scrambler_step(m, state, self.i_data.payload, self.data_width,
                                  self.polynomial, self.descrambler)
        m.d.comb += self.i_data.ready.eq(~self.o_data.valid | self.o_data.ready)
        with m.If(self.i_data.valid & self.i_data.ready):
            m.d.sync += [state.eq(nxt), self.o_data.payload.eq(out),
                         self.o_data.valid.eq(1)]
        with m.Elif(self.o_data.ready):
            m.d.sync += self.o_data.valid.eq(0)
        return m


class Descrambler(Scrambler):
    """Self-synchronizing descrambler (IEEE 802.3 cl. 49.2.10), the inverse of
    :class:`Scrambler` with the same parameters and ports.

    For each received bit: ``out = in ^ XOR(s[k-1] for each tap k)``, then ``in`` is shifted
    into ``s[0]``. After ``state_width`` received bits (58 by default) the state equals the
    transmitter's, whatever it was before: output equals the plain data from then on.

    Timing
    ------
    As :class:`Scrambler`: latency 1 cycle, one word per cycle, reset loads ``init``.
    """

    descrambler = True


def _params():
    return [Param("data_width", int, 64, "bits per word (any positive width)"),
            Param("polynomial", int, POLY_CL49, "bit k set for each term x^k (cl. 49: "
                  "1 + x^39 + x^58)"),
            Param("init", int, 0, "state after reset")]


BLOCKS = [
    Block("scrambler", Scrambler, params=_params(),
          doc="Self-synchronizing scrambler, IEEE 802.3 cl. 49 bit order"),
    Block("descrambler", Descrambler, params=_params(),
          doc="Self-synchronizing descrambler, IEEE 802.3 cl. 49 bit order"),
]
