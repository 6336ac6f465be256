"""A synthesizable lane fault injector and cable delay for one 66-bit PCS lane."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["LaneFault", "xorshift32", "xorshift32_step", "LANE_BITS", "ber_threshold",
           "threshold_ber"]

LANE_BITS = 66
_MASK32 = 0xFFFF_FFFF


def xorshift32_step(x: int) -> int:
    """Marsaglia's xorshift32 (13, 17, 5): the software twin of the RTL generator.

    A linear map over GF(2) with period 2^32 − 1 on nonzero states (0 is a fixed point)."""
    x ^= (x << 13) & _MASK32
    x ^= x >> 17
    x ^= (x << 5) & _MASK32
    return x & _MASK32


def xorshift32(x):
    """RTL: one xorshift32 step of a 32-bit value (three shift-XORs)."""
    a = (x ^ (x << 13))[:32]
    b = a ^ (a >> 17)
    return (b ^ (b << 5))[:32]


def ber_threshold(ber: float) -> int:
    """The ``threshold`` that gives bit error rate ``ber`` (0 ≤ ber ≤ 1/66)."""
    if not 0 <= ber <= 1 / LANE_BITS:
        raise ValueError(f"ber={ber!r} must be in [0, 1/66]: one flip per 66-bit block at most")
    return min(_MASK32, round(ber * LANE_BITS * _MASK32))


def threshold_ber(threshold: int) -> float:
    """The exact bit error rate of ``threshold`` (over a full generator period)."""
    return threshold / _MASK32 / LANE_BITS


def _seed(seed: int, salt: int) -> int:
    x = (seed * 0x9E3779B1 + salt * 0x85EBCA6B + 0x1234567) & _MASK32
    for _ in range(4):
        x = xorshift32_step(x or 1)
    return x or 1


class LaneFault(wiring.Component):
    """Bit errors, a one-shot bit slip, a dark lane and a cable delay on one PCS lane.

    Per cycle (one 66-bit block): a xorshift32 generator ``x`` steps once; if
    ``x <= i_threshold`` one bit of the block is flipped, at position
    ``(y[16:32] * 66) >> 16`` from a second xorshift32 generator ``y``. ``x`` runs over
    every nonzero 32-bit value once per period, so the block error probability is exactly
    ``T / (2^32 − 1)`` over a period and the **bit error rate is T / (66 · (2^32 − 1))**
    (at most one flipped bit per block; ``T = 0`` never flips; :func:`ber_threshold`
    converts). Then a slip window delays the lane by ``offset`` bits (0..65): a strobe on
    ``i_slip_valid`` adds ``i_slip_bits`` to ``offset`` modulo 66 (wrapping past 65 skips a
    whole block instead of delaying it). Then ``latency`` register stages (the cable), and
    ``i_dark`` forces zeros at the output (invalid sync headers: the receiver loses lock).

    Parameters
    ----------
    seed : int
        Seeds both generators (any int; a zero state is avoided).
    latency : int
        Register stages of the cable (≥ 0).

    Members
    -------
    i_lane : In(66)
        Block from the PCS transmitter (bit 0 first on the wire).
    o_lane : Out(66)
        Block toward the PCS receiver.
    i_threshold : In(32)
        Error threshold T (see above).
    i_slip_valid : In(1), i_slip_bits : In(7)
        One-shot slip of ``i_slip_bits`` (0..65) bits, taken in the cycle of the strobe.
    i_dark : In(1)
        The lane carries zeros.
    o_flips : Out(32)
        Bits flipped so far (saturating).

    Timing
    ------
    ``o_lane`` in cycle t + ``latency`` carries the block of cycle t (with ``offset`` bits
    of the previous block in front). A slip strobe in cycle t changes the output from t+1.
    Reset: generators at their seeds, offset 0, counter 0.
    """

    def __init__(self, seed: int = 1, latency: int = 0):
        if not isinstance(latency, int) or latency < 0:
            raise ValueError(f"latency={latency!r} must be a non-negative integer")
        self.seed = int(seed)
        self.latency = latency
        super().__init__({
            "i_lane": In(LANE_BITS),
            "o_lane": Out(LANE_BITS),
            "i_threshold": In(32),
            "i_slip_valid": In(1),
            "i_slip_bits": In(7),
            "i_dark": In(1),
            "o_flips": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        x = Signal(32, init=_seed(self.seed, 1))
        y = Signal(32, init=_seed(self.seed, 2))
        xn, yn = xorshift32(x), xorshift32(y)
        m.d.sync += [x.eq(xn), y.eq(yn)]
        flip = Signal()
        pos = Signal(7)
        m.d.comb += [flip.eq(xn <= self.i_threshold),
                     pos.eq((yn[16:32] * LANE_BITS) >> 16)]
        err = Signal(LANE_BITS)
        m.d.comb += err.eq(Mux(flip, Const(1, LANE_BITS) << pos, 0))
        with m.If(flip & (self.o_flips != _MASK32)):
            m.d.sync += self.o_flips.eq(self.o_flips + 1)
        cur = Signal(LANE_BITS)
        m.d.comb += cur.eq(self.i_lane ^ err)

        prev = Signal(LANE_BITS)
        offset = Signal(range(LANE_BITS))
        m.d.sync += prev.eq(cur)
        with m.If(self.i_slip_valid):
            s = offset + self.i_slip_bits
            m.d.sync += offset.eq(Mux(s >= LANE_BITS, s - LANE_BITS, s))
        window = Cat(prev, cur)      # chronological: prev's bit 0 is the oldest
        slipped = Signal(LANE_BITS)
        m.d.comb += slipped.eq((window << offset)[LANE_BITS:2 * LANE_BITS])
        lane = slipped
        for i in range(self.latency):
            d = Signal(LANE_BITS, name=f"cable{i}")
            m.d.sync += d.eq(lane)
            lane = d
        m.d.comb += self.o_lane.eq(Mux(self.i_dark, 0, lane))
        return m
