"""A synthesizable lane fault injector and cable delay for one PCS lane (66-bit 64b/66b
blocks, or the W-bit words of a FEC lane)."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["LaneFault", "xorshift32", "xorshift32_step", "LANE_BITS", "ber_threshold",
           "threshold_ber", "MAX_BURST", "seed_values"]

LANE_BITS = 66
#: Longest error burst of :class:`LaneFault`, in bits.
MAX_BURST = 64
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


def ber_threshold(ber: float, width: int = LANE_BITS) -> int:
    """The ``threshold`` that gives bit error rate ``ber`` on a ``width``-bit lane
    (0 ≤ ber ≤ 1/width)."""
    if not 0 <= ber <= 1 / width:
        raise ValueError(f"ber={ber!r} must be in [0, 1/{width}]: one flip per "
                         f"{width}-bit lane word at most")
    return min(_MASK32, round(ber * width * _MASK32))


def threshold_ber(threshold: int, width: int = LANE_BITS) -> float:
    """The exact bit error rate of ``threshold`` on a ``width``-bit lane (over a full
    generator period)."""
    return threshold / _MASK32 / width


def _seed(seed: int, salt: int) -> int:
    x = (seed * 0x9E3779B1 + salt * 0x85EBCA6B + 0x1234567) & _MASK32
    for _ in range(4):
        x = xorshift32_step(x or 1)
    return x or 1


def seed_values(seed: int) -> tuple[int, int]:
    """The reset values of a :class:`LaneFault`'s two generators for ``seed`` (what
    ``i_seed_x``/``i_seed_y`` take with ``seed_ports``)."""
    return _seed(int(seed), 1), _seed(int(seed), 2)


class LaneFault(wiring.Component):
    """Bit errors, error bursts, a one-shot bit slip, a dark lane and a cable delay on one
    PCS lane of ``width`` bits per cycle (66: a 64b/66b block; the words below say
    "block" and 66 for that case, read W for a FEC lane's W-bit word).

    Per cycle (one 66-bit block): a xorshift32 generator ``x`` steps once; if
    ``x <= i_threshold`` an *error event* starts at bit position
    ``pos = (y[16:32] * 66) >> 16`` (0..65) of the block, from a second xorshift32
    generator ``y``. ``x`` runs over every nonzero 32-bit value once per period, so the
    event probability per block is exactly ``T / (2^32 − 1)`` over a period (``T = 0``
    never fires). Without bursts (``max_burst = 0``, or ``i_burst_len ≤ 1``) an event flips
    the one bit ``pos``, so the **bit error rate is T / (66 · (2^32 − 1))**
    (:func:`ber_threshold` converts). With ``max_burst > 0`` and ``i_burst_len = L ≥ 1`` an
    event inverts the ``L`` consecutive wire bits ``pos .. pos + L − 1``: the bits past
    bit 65 land in bits ``0 .. pos + L − 67`` of the next block (a carry register), so a
    burst crosses block boundaries, and any burst of 11 or more bits crosses a 10-bit FEC
    symbol boundary wherever it starts. Bits hit by two overlapping bursts are inverted
    once (the error mask is the union). The burst length is sampled when the event fires.

    Then a slip window delays the lane by ``offset`` bits (0..65): a strobe on
    ``i_slip_valid`` adds ``i_slip_bits`` to ``offset`` modulo 66 (wrapping past 65 skips a
    whole block instead of delaying it). Then ``latency`` register stages (the cable).
    Last the dark-lane gate: while dark the output is all zeros, whose sync header ``00``
    is invalid (IEEE 802.3 clause 49.2.4.3: only ``01`` and ``10`` are valid), so the
    receiver loses block lock. The lane is dark while ``i_dark`` is high and, with
    ``dark_timer``, for ``N`` cycles after a strobe on ``i_dark_start`` with
    ``i_dark_cycles = N`` (a new strobe restarts the count; ``N = 0`` ends it).

    Parameters
    ----------
    seed : int
        Seeds both generators (any int; a zero state is avoided).
    latency : int
        Register stages of the cable (≥ 0).
    max_burst : int
        Longest burst in bits (0..min(64, width); 0: no burst logic and no
        ``i_burst_len`` port).
    dark_timer : bool
        Add the timed dark lane (``i_dark_start``, ``i_dark_cycles``, ``o_dark``).
    width : int
        Bits per lane per cycle, 8..127 (default 66; a FEC lane of S symbols has 10 S).
        With ``width != 66`` the dark lane's zeros are caught by the FEC receiver's marker
        lock instead of the sync header check.
    seed_ports : bool
        Take the generators' reset values from ``i_seed_x``/``i_seed_y`` instead of
        ``seed`` (:func:`seed_values` gives a seed's pair), so that one module serves
        lanes of different seeds (docs/fabric.md, "Split Verilog"). The generators then
        load the ports in every cycle of the domain's reset (they are not reset to a
        constant; before the first reset they hold ``seed``'s values); after a reset the
        lane runs as with the ports' seed.

    Members
    -------
    i_lane : In(66)
        Block from the PCS transmitter (bit 0 first on the wire).
    o_lane : Out(66)
        Block toward the PCS receiver.
    i_threshold : In(32)
        Error event threshold T (see above).
    i_burst_len : In(range(max_burst + 1))
        Burst length L in bits (only with ``max_burst > 0``; 0 and 1 give single flips).
    i_slip_valid : In(1), i_slip_bits : In(7)
        One-shot slip of ``i_slip_bits`` (0..65) bits, taken in the cycle of the strobe.
    i_dark : In(1)
        The lane carries zeros.
    i_dark_start : In(1), i_dark_cycles : In(32)
        Timed dark lane (only with ``dark_timer``).
    o_dark : Out(1)
        The timed dark lane is on this cycle (only with ``dark_timer``).
    o_flips : Out(32)
        Bits flipped so far (saturating).
    i_seed_x, i_seed_y : In(32)
        The generators' reset values (only with ``seed_ports``).

    Timing
    ------
    ``o_lane`` in cycle t + ``latency`` carries the block of cycle t (with ``offset`` bits
    of the previous block in front); a burst event in cycle t also hits the block of cycle
    t + 1 when ``pos + L > 66``. A slip strobe in cycle t changes the output from t+1.
    ``i_dark`` acts on ``o_lane`` in the same cycle; a strobe on ``i_dark_start`` in cycle
    t darkens ``o_lane`` in cycles t+1 .. t+N. ``o_flips`` counts a bit in the cycle its
    block passes the error stage. Reset: generators at their seeds, offset 0, no carry,
    dark timer 0, counter 0.
    """

    def __init__(self, seed: int = 1, latency: int = 0, max_burst: int = 0,
                 dark_timer: bool = False, width: int = LANE_BITS,
                 seed_ports: bool = False):
        if not isinstance(width, int) or isinstance(width, bool) or not 8 <= width <= 127:
            raise ValueError(f"width={width!r} must be an integer in 8..127 (bits per cycle)")
        if not isinstance(latency, int) or isinstance(latency, bool) or latency < 0:
            raise ValueError(f"latency={latency!r} must be a non-negative integer")
        if (not isinstance(max_burst, int) or isinstance(max_burst, bool)
                or not 0 <= max_burst <= min(MAX_BURST, width)):
            raise ValueError(f"max_burst={max_burst!r} must be an integer in "
                             f"0..{min(MAX_BURST, width)}")
        if not isinstance(dark_timer, bool):
            raise TypeError(f"dark_timer={dark_timer!r} must be a bool")
        if not isinstance(seed_ports, bool):
            raise TypeError(f"seed_ports={seed_ports!r} must be a bool")
        self.seed_ports = seed_ports
        self.seed = int(seed)
        self.latency = latency
        self.max_burst = max_burst
        self.dark_timer = dark_timer
        self.width = width
        sig = {
            "i_lane": In(width),
            "o_lane": Out(width),
            "i_threshold": In(32),
            "i_slip_valid": In(1),
            "i_slip_bits": In(7),
            "i_dark": In(1),
            "o_flips": Out(32),
        }
        if max_burst:
            sig["i_burst_len"] = In(range(max_burst + 1))
        if seed_ports:
            sig.update({"i_seed_x": In(32), "i_seed_y": In(32)})
        if dark_timer:
            sig.update({"i_dark_start": In(1), "i_dark_cycles": In(32), "o_dark": Out(1)})
        super().__init__(sig)

    def elaborate(self, platform):
        W = self.width
        m = Module()
        if self.seed_ports:
            # loaded from the ports during reset; until the first reset they hold the
            # values of `seed` (a defined state for a flow that never resets)
            x = Signal(32, init=_seed(self.seed, 1), reset_less=True)
            y = Signal(32, init=_seed(self.seed, 2), reset_less=True)
        else:
            x = Signal(32, init=_seed(self.seed, 1))
            y = Signal(32, init=_seed(self.seed, 2))
        xn, yn = xorshift32(x), xorshift32(y)
        if self.seed_ports:
            with m.If(ResetSignal()):
                m.d.sync += [x.eq(self.i_seed_x), y.eq(self.i_seed_y)]
            with m.Else():
                m.d.sync += [x.eq(xn), y.eq(yn)]
        else:
            m.d.sync += [x.eq(xn), y.eq(yn)]
        flip = Signal()
        pos = Signal(7)
        m.d.comb += [flip.eq(xn <= self.i_threshold),
                     pos.eq((yn[16:32] * W) >> 16)]
        err = Signal(W)
        if self.max_burst:
            # thermometer code of L (at least one bit: L = 0 flips one bit like L = 1)
            ones = Signal(self.max_burst)
            m.d.comb += ones.eq(Cat(*((self.i_burst_len > i) | (i == 0)
                                      for i in range(self.max_burst))))
            span = Signal(2 * W)
            m.d.comb += span.eq(Mux(flip, (ones << pos)[:2 * W], 0))
            carry = Signal(W)
            m.d.sync += carry.eq(span[W:])
            m.d.comb += err.eq(span[:W] | carry)
            count = Signal(range(W + 1))
            m.d.comb += count.eq(sum(err[i] for i in range(W)))
            total = self.o_flips + count
            m.d.sync += self.o_flips.eq(Mux(total > _MASK32, _MASK32, total))
        else:
            m.d.comb += err.eq(Mux(flip, Const(1, W) << pos, 0))
            with m.If(flip & (self.o_flips != _MASK32)):
                m.d.sync += self.o_flips.eq(self.o_flips + 1)
        cur = Signal(W)
        m.d.comb += cur.eq(self.i_lane ^ err)

        prev = Signal(W)
        offset = Signal(range(W))
        m.d.sync += prev.eq(cur)
        with m.If(self.i_slip_valid):
            s = offset + self.i_slip_bits
            m.d.sync += offset.eq(Mux(s >= W, s - W, s))
        window = Cat(prev, cur)      # chronological: prev's bit 0 is the oldest
        slipped = Signal(W)
        m.d.comb += slipped.eq((window << offset)[W:2 * W])
        lane = slipped
        for i in range(self.latency):
            d = Signal(W, name=f"cable{i}")
            m.d.sync += d.eq(lane)
            lane = d
        dark = self.i_dark
        if self.dark_timer:
            remain = Signal(32)
            with m.If(self.i_dark_start):
                m.d.sync += remain.eq(self.i_dark_cycles)
            with m.Elif(remain != 0):
                m.d.sync += remain.eq(remain - 1)
            m.d.comb += self.o_dark.eq(remain != 0)
            dark = self.i_dark | self.o_dark
        m.d.comb += self.o_lane.eq(Mux(dark, 0, lane))
        return m
