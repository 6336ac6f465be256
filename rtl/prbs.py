"""PRBS generator and self-synchronizing checker (ITU-T O.150 polynomials).

The per-cycle XOR equations are those of the O.150 shift register over ``data_width`` steps
(:func:`fusionfabric.rtl.hdl.shift_register_matrices`); the checker's behaviour is modelled word for word by :class:`fusionfabric.sim.prbs.PrbsChecker`.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.blocks import Block, Param
from fusionfabric.formats.primitives import BLOCK_BITS, ERRORS_MAX, LOCK_BITS, PRBS_TAPS, prbs_taps
from fusionfabric.rtl.hdl import gf2_product, popcount, shift_register_matrices

__all__ = ["PrbsGenerator", "PrbsChecker", "BLOCKS"]

ORDERS = tuple(PRBS_TAPS)


def _check(order, data_width):
    if order not in PRBS_TAPS:
        raise ValueError(f"order={order!r} is not one of {', '.join(map(str, ORDERS))}")
    if not isinstance(data_width, int) or data_width < 1:
        raise ValueError(f"data_width={data_width!r} must be a positive integer")


class PrbsGenerator(wiring.Component):
    """PRBS generator, ``data_width`` bits per cycle (ITU-T O.150 polynomials).

    The sequence obeys ``b[t] = b[t-n] ^ b[t-m]`` for x^n + x^m + 1 (PRBS7: x^7 + x^6 + 1,
    PRBS15: x^15 + x^14 + 1, PRBS23: x^23 + x^18 + 1, PRBS31: x^31 + x^28 + 1); bit 0 of a
    word is the first bit in time. Not inverted.

    Parameters
    ----------
    order : int
        7, 15, 23 or 31.
    data_width : int
        Bits per word, any positive width.

    Members
    -------
    o_data : Out(stream.Signature(data_width))
        The pattern; valid from the first cycle after reset, advances on each handshake.

    Timing
    ------
    ``o_data.valid`` rises one cycle after reset and stays high; one word per cycle under
    ``ready``. Reset loads the all-ones state, so the first word is
    ``fusionfabric.sim.prbs.prbs_words(order, data_width, 1)``.
    """

    def __init__(self, order: int = 31, data_width: int = 64):
        _check(order, data_width)
        self.order = order
        self.data_width = data_width
        self.taps = prbs_taps(order)
        super().__init__({"o_data": Out(stream.Signature(data_width))})

    def elaborate(self, platform):
        m = Module()
        n = self.order
        state = Signal(n, init=(1 << n) - 1)
        out_m, _, next_m, _ = shift_register_matrices(n, self.taps, self.data_width)
        m.d.comb += self.o_data.payload.eq(gf2_product(m, (out_m, state), name="pattern"))
        m.d.sync += self.o_data.valid.eq(1)
        with m.If(self.o_data.valid & self.o_data.ready):
            m.d.sync += state.eq(gf2_product(m, (next_m, state), name="next_state"))
        return m


class PrbsChecker(wiring.Component):
    """Self-synchronizing PRBS checker with lock indication and an exact bit-error counter.

    Hunting: each received bit is predicted from the received bits (``r[t-n] ^ r[t-m]``);
    after ``lock_words = ceil(64 / data_width)`` consecutive words without a mismatch the
    checker locks and seeds its own LFSR from the last ``n`` received bits. Locked: each bit
    is compared with the checker's **own free-running LFSR**, so each flipped bit is counted
    exactly once (a self-synchronizing comparison would count it up to three times).
    Locked words form blocks of ``block_words = ceil(256 / data_width)``; a block with more
    than a quarter of its bits wrong drops the lock. Model: :class:`fusionfabric.sim.prbs.PrbsChecker`.

    Parameters
    ----------
    order : int
        7, 15, 23 or 31.
    data_width : int
        Bits per word, any positive width.

    Members
    -------
    i_data : In(stream.Signature(data_width))
        Received words (always ready).
    o_locked : Out(1)
        Locked to the pattern.
    o_errors : Out(32)
        Bit errors seen while locked, saturating at 2**32 - 1.

    Timing
    ------
    ``o_locked`` and ``o_errors`` reflect a word one cycle after its handshake (registered).
    One word per cycle; ``i_data.ready`` is always 1. Reset: hunting, counters zero.
    """

    def __init__(self, order: int = 31, data_width: int = 64):
        _check(order, data_width)
        self.order = order
        self.data_width = data_width
        self.taps = prbs_taps(order)
        self.lock_words = -(-LOCK_BITS // data_width)
        self.block_words = -(-BLOCK_BITS // data_width)
        super().__init__({"i_data": In(stream.Signature(data_width)),
                          "o_locked": Out(1), "o_errors": Out(32)})

    def elaborate(self, platform):
        m = Module()
        n, w = self.order, self.data_width
        data = self.i_data.payload
        hist = Signal(n)
        lfsr = Signal(n)
        locked = Signal()
        errors = Signal(32)
        clean = Signal(range(self.lock_words + 1))
        block_count = Signal(range(self.block_words + 1))
        block_errors = Signal(range(self.block_words * w + 1))

        gen_out, _, gen_next, _ = shift_register_matrices(n, self.taps, w)
        ph, pd, hh, hd = shift_register_matrices(n, self.taps, w, shift_in="in",
                                                 xor_input=False)
        own = gf2_product(m, (gen_out, lfsr), name="own")
        own_next = gf2_product(m, (gen_next, lfsr), name="own_next")
        predicted = gf2_product(m, (ph, hist), (pd, data), name="predicted")
        hist_next = gf2_product(m, (hh, hist), (hd, data), name="hist_next")
        diff_locked = Signal(w)
        m.d.comb += diff_locked.eq(own ^ data)
        miss = Signal(w)
        m.d.comb += miss.eq(predicted ^ data)
        nerr = Signal(range(w + 1))
        m.d.comb += nerr.eq(popcount(diff_locked))

        m.d.comb += [self.o_locked.eq(locked), self.o_errors.eq(errors),
                     self.i_data.ready.eq(1)]
        with m.If(self.i_data.valid):
            m.d.sync += hist.eq(hist_next)
            with m.If(locked):
                total = errors + nerr
                m.d.sync += [lfsr.eq(own_next),
                             errors.eq(Mux(total > ERRORS_MAX, ERRORS_MAX, total))]
                blk_err = block_errors + nerr
                with m.If(block_count == self.block_words - 1):
                    m.d.sync += [block_count.eq(0), block_errors.eq(0)]
                    with m.If(4 * blk_err > self.block_words * w):
                        m.d.sync += [locked.eq(0), clean.eq(0)]
                with m.Else():
                    m.d.sync += [block_count.eq(block_count + 1), block_errors.eq(blk_err)]
            with m.Else():
                clean_next = Mux(miss.any(), 0, clean + 1)
                m.d.sync += clean.eq(clean_next)
                with m.If(clean_next >= self.lock_words):
                    m.d.sync += [locked.eq(1), lfsr.eq(hist_next), block_count.eq(0),
                                 block_errors.eq(0)]
        return m


def _params():
    return [Param("order", int, 31, "PRBS order (x^n + x^m + 1, ITU-T O.150)",
                  choices=ORDERS),
            Param("data_width", int, 64, "bits per word (any positive width)")]


BLOCKS = [
    Block("prbs-gen", PrbsGenerator, params=_params(), doc="PRBS7/15/23/31 generator"),
    Block("prbs-check", PrbsChecker, params=_params(),
          doc="Self-synchronizing PRBS checker with lock and exact bit-error count"),
]
