"""A multi-lane serial channel with faults, for PCS, chiplet and fabric testbenches.

:class:`LaneChannel` carries ``n_lanes`` bit streams. Each clock the transmitter hands it one
``width``-bit word per lane (bit 0 first on the wire) and the receiver takes one word per
lane back: the words it returns are cut from each lane's bit stream at the channel's own
boundaries, so a bit slip really misaligns the receiver. It is pure Python/numpy (no cocotb),
so golden-model tests and cocotb testbenches share it. Faults:

========================  ==========================================================
``set_ber(rate)``         flip each bit independently with probability ``rate``
``burst(lane, n_bits)``   flip the next ``n_bits`` bits of ``lane``
``slip(lane, k)``         ``k > 0``: insert ``k`` bits (the lane is ``k`` bits later);
                          ``k < 0``: delete ``-k`` bits (needs that much slack)
``skew(lane, n_words)``   delay ``lane`` by ``n_words`` whole words (0 at creation)
``permute(perm)``         output lane ``j`` carries input lane ``perm[j]``
``hold(lane, value)``     output ``lane`` gives ``value`` every word (``None`` releases)
========================  ==========================================================

``burst``, ``slip`` and ``skew`` name a transmitter (input) lane; ``hold`` names a receiver
(output) lane, after the permutation. Faults act from the next :meth:`LaneChannel.push` on.

Every flipped bit is logged in :attr:`flips` as ``(lane, bit_index)`` where ``bit_index``
counts the bits that lane's *transmitter* sent (0 = first bit ever sent), so a test can
predict parity checks independently of the receiver. Random choices use the ``rng``
(``numpy.random.Generator``) given at creation.

Example::

    ch = LaneChannel(4, 66, rng, slack=1)
    ch.skew(2, 3); ch.permute([1, 0, 2, 3]); ch.set_ber(1e-5)
    rx_words = ch.push(tx_words)          # once per clock
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["LaneChannel"]


class _Lane:
    def __init__(self, width: int, slack_bits: int):
        self.bits = 0          # pending bits, oldest at bit 0
        self.count = slack_bits
        self.sent = 0          # bits received from the transmitter so far
        self.burst = 0


class LaneChannel:
    """``n_lanes`` serial lanes of ``width``-bit words with injectable faults.

    Parameters
    ----------
    n_lanes : int
        Number of lanes.
    width : int
        Bits per word per clock (66 for one 64b/66b block).
    rng : numpy.random.Generator
        Source of every random choice (bit errors, inserted bits).
    slack : int
        Words of delay each lane starts with (zeros), which is what ``slip(lane, -k)``
        may delete. Default 1.
    """

    def __init__(self, n_lanes: int, width: int, rng: np.random.Generator, slack: int = 1):
        if n_lanes < 1:
            raise ValueError(f"n_lanes={n_lanes} must be positive")
        if width < 1:
            raise ValueError(f"width={width} must be positive")
        if slack < 0:
            raise ValueError(f"slack={slack} must be >= 0")
        self.n_lanes, self.width, self.rng = n_lanes, width, rng
        self.mask = (1 << width) - 1
        self.lanes = [_Lane(width, slack * width) for _ in range(n_lanes)]
        self.perm = list(range(n_lanes))
        self.held: list[int | None] = [None] * n_lanes
        self.ber = 0.0
        self.flips: list[tuple[int, int]] = []
        self.words = 0

    # -- faults ------------------------------------------------------------------------
    def _lane(self, lane: int) -> _Lane:
        if not 0 <= lane < self.n_lanes:
            raise ValueError(f"lane={lane} is not in 0..{self.n_lanes - 1}")
        return self.lanes[lane]

    def set_ber(self, rate: float) -> None:
        """Flip every later bit independently with probability ``rate`` (0 stops)."""
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"rate={rate} must be in [0, 1)")
        self.ber = float(rate)

    def burst(self, lane: int, n_bits: int) -> None:
        """Invert the next ``n_bits`` bits that ``lane``'s transmitter sends."""
        if n_bits < 0:
            raise ValueError(f"n_bits={n_bits} must be >= 0")
        self._lane(lane).burst += n_bits

    def slip(self, lane: int, k: int) -> None:
        """Insert ``k > 0`` random bits into ``lane`` now, or delete ``-k`` pending bits."""
        ln = self._lane(lane)
        if k > 0:
            extra = int.from_bytes(self.rng.bytes((k + 7) // 8), "little") & ((1 << k) - 1)
            ln.bits |= extra << ln.count
            ln.count += k
        elif k < 0:
            if -k > ln.count:
                raise ValueError(f"slip(lane={lane}, k={k}): only {ln.count} bits pending; "
                                 f"create the channel with more slack")
            ln.bits >>= -k
            ln.count += k
        else:
            raise ValueError("slip k must be non-zero")

    def skew(self, lane: int, n_words: int) -> None:
        """Delay ``lane`` by ``n_words`` more whole words (zeros are inserted)."""
        if n_words < 0:
            raise ValueError(f"n_words={n_words} must be >= 0")
        ln = self._lane(lane)
        n = n_words * self.width
        ln.bits <<= n
        ln.count += n

    def permute(self, perm: Sequence[int]) -> None:
        """Output lane ``j`` carries input lane ``perm[j]`` from now on."""
        perm = [int(p) for p in perm]
        if sorted(perm) != list(range(self.n_lanes)):
            raise ValueError(f"perm={perm} is not a permutation of 0..{self.n_lanes - 1}")
        self.perm = perm

    def hold(self, lane: int, value: int | None) -> None:
        """Output lane ``lane`` (an output index) stuck at ``value``; ``None`` releases."""
        if not 0 <= lane < self.n_lanes:
            raise ValueError(f"lane={lane} is not in 0..{self.n_lanes - 1}")
        if value is not None and not 0 <= int(value) <= self.mask:
            raise ValueError(f"value={value:#x} does not fit in {self.width} bits")
        self.held[lane] = None if value is None else int(value)

    # -- traffic -----------------------------------------------------------------------
    def _errors(self, lane_no: int, ln: _Lane) -> int:
        flip = 0
        if ln.burst:
            n = min(ln.burst, self.width)
            flip |= (1 << n) - 1
            ln.burst -= n
        if self.ber > 0.0:
            n = int(self.rng.binomial(self.width, self.ber))
            if n:
                for pos in self.rng.choice(self.width, size=n, replace=False):
                    flip |= 1 << int(pos)
        pos = 0
        f = flip
        while f:
            if f & 1:
                self.flips.append((lane_no, ln.sent + pos))
            f >>= 1
            pos += 1
        return flip

    def push(self, words: Sequence[int]) -> list[int]:
        """One clock: take one word per lane from the transmitter, return one per lane."""
        if len(words) != self.n_lanes:
            raise ValueError(f"{len(words)} words given for {self.n_lanes} lanes")
        outs = []
        for i, (ln, w) in enumerate(zip(self.lanes, words)):
            w = int(w) & self.mask
            w ^= self._errors(i, ln)
            ln.bits |= w << ln.count
            ln.count += self.width
            ln.sent += self.width
            out = ln.bits & self.mask
            ln.bits >>= self.width
            ln.count -= self.width
            outs.append(out)
        self.words += 1
        result = [outs[self.perm[j]] for j in range(self.n_lanes)]
        for j, value in enumerate(self.held):
            if value is not None:
                result[j] = value
        return result
