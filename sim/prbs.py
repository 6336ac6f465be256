"""PRBS generator and self-synchronizing checker (ITU-T O.150 polynomials), pure numpy.

Patterns (ITU-T O.150; PRBS7 as used by IEEE 802.3 and OIF test patterns)::

    PRBS7  = x^7  + x^6  + 1        PRBS23 = x^23 + x^18 + 1
    PRBS15 = x^15 + x^14 + 1        PRBS31 = x^31 + x^28 + 1

A PRBS of order ``n`` with taps ``(m, n)`` is the bit sequence with
``b[t] = b[t-n] ^ b[t-m]``. The generator is a Fibonacci LFSR whose state is an integer
with bit k holding ``b[t-1-k]`` (bit 0 the most recent bit): each step emits
``b = s[n-1] ^ s[m-1]`` and shifts it into ``s[0]``. Bit 0 of a word is the first bit in
time. The sequence is not inverted (O.150 lists inverted variants for some patterns; XOR
with all ones if you need one).

Checker (:class:`PrbsChecker`, the same behaviour as ``fusionfabric.rtl.prbs.PrbsChecker``):

- **Hunting**: each received bit is predicted from the previously *received* bits
  (``p[t] = r[t-n] ^ r[t-m]``, a self-synchronizing prediction). After
  ``lock_words = ceil(LOCK_BITS / data_width)`` consecutive words without a mismatch the
  checker locks and seeds its own LFSR with the last ``n`` received bits.
- **Locked**: each bit is compared with the checker's *own free-running* LFSR, so a flipped
  bit counts exactly once (a self-synchronizing comparison would count it up to three
  times: at t, t+m and t+n). ``errors`` counts the mismatched bits, saturating at
  ``2**32 - 1``; nothing is counted while hunting.
- **Loss of lock**: the locked words are grouped in blocks of
  ``block_words = ceil(BLOCK_BITS / data_width)``; a block with more than a quarter of its
  bits in error returns the checker to hunting (a misaligned or foreign pattern gives about
  half).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fusionfabric.formats.primitives import BLOCK_BITS, ERRORS_MAX, LOCK_BITS, prbs_taps
from fusionfabric.sim.scrambler import bits_to_words, iir_fill

__all__ = ["prbs_bits_ref", "prbs_words", "predict_bits_ref", "gen_matrices",
           "predict_matrices", "PrbsChecker", "VECTORS"]

def _check_state(order: int, state: int, allow_zero: bool = False) -> int:
    state = int(state)
    if not 0 <= state < (1 << order) or (state == 0 and not allow_zero):
        raise ValueError(f"state={state:#x} must be a non-zero {order}-bit value")
    return state


# -- per-bit references ---------------------------------------------------------------------
def prbs_bits_ref(order: int, nbits: int, state: int | None = None) -> tuple[list[int], int]:
    """Per-bit generator: ``nbits`` bits from ``state`` (default all ones); returns
    ``(bits, state_after)``."""
    m, n = prbs_taps(order)
    state = (1 << n) - 1 if state is None else _check_state(order, state, allow_zero=True)
    mask = (1 << n) - 1
    out = []
    for _ in range(nbits):
        b = ((state >> (n - 1)) ^ (state >> (m - 1))) & 1
        out.append(b)
        state = ((state << 1) | b) & mask
    return out, state


def predict_bits_ref(order: int, bits: Sequence[int], hist: int = 0) -> tuple[list[int], int]:
    """Self-synchronizing prediction ``p[t] = r[t-n] ^ r[t-m]`` of received ``bits`` given
    the history ``hist`` of the last ``n`` received bits; returns ``(predicted, hist_after)``."""
    m, n = prbs_taps(order)
    mask = (1 << n) - 1
    out = []
    for r in bits:
        out.append(((hist >> (n - 1)) ^ (hist >> (m - 1))) & 1)
        hist = ((hist << 1) | (int(r) & 1)) & mask
    return out, hist


# -- fast word generator --------------------------------------------------------------------
def _words(bits: np.ndarray, width: int) -> list[int]:
    return bits_to_words(bits, width)


def prbs_words(order: int, data_width: int, count: int, state: int | None = None
               ) -> tuple[list[int], int]:
    """``count`` words of ``data_width`` bits (bit 0 first in time); vectorized with
    :func:`fusionfabric.sim.scrambler.iir_fill` (blocks of ``m`` bits, then of ``2^j m`` bits with the
    squared polynomial). Returns ``(words, state_after)``."""
    m, n = prbs_taps(order)
    if int(data_width) < 1:
        raise ValueError(f"data_width={data_width} must be positive")
    state = (1 << n) - 1 if state is None else _check_state(order, state)
    total = int(count) * int(data_width)
    buf = np.zeros(n + total, dtype=np.uint8)
    buf[:n] = [(state >> (n - 1 - i)) & 1 for i in range(n)]  # oldest first
    iir_fill(buf, n, None, (m, n))
    after = 0
    for b in buf[len(buf) - n:]:
        after = (after << 1) | int(b)
    return _words(buf[n:], data_width), after


# -- parallel equations ---------------------------------------------------------------------
def gen_matrices(order: int, data_width: int):
    """``(out_from_state (W, n), next_from_state (n, n))`` GF(2) matrices of one cycle,
    probed from :func:`prbs_bits_ref`."""
    _, n = prbs_taps(order)
    w = int(data_width)
    out = np.zeros((w, n), dtype=np.uint8)
    nxt = np.zeros((n, n), dtype=np.uint8)
    for j in range(n):
        bits, st = prbs_bits_ref(order, w, 1 << j)
        out[:, j] = bits
        nxt[:, j] = [(st >> i) & 1 for i in range(n)]
    return out, nxt


def predict_matrices(order: int, data_width: int):
    """``(pred_from_hist (W, n), pred_from_data (W, W), hist_from_hist (n, n),
    hist_from_data (n, W))`` of the self-synchronizing prediction, probed from
    :func:`predict_bits_ref`."""
    _, n = prbs_taps(order)
    w = int(data_width)
    ph = np.zeros((w, n), dtype=np.uint8)
    pd = np.zeros((w, w), dtype=np.uint8)
    hh = np.zeros((n, n), dtype=np.uint8)
    hd = np.zeros((n, w), dtype=np.uint8)
    for j in range(n):
        p, h = predict_bits_ref(order, [0] * w, 1 << j)
        ph[:, j] = p
        hh[:, j] = [(h >> i) & 1 for i in range(n)]
    for j in range(w):
        bits = [0] * w
        bits[j] = 1
        p, h = predict_bits_ref(order, bits, 0)
        pd[:, j] = p
        hd[:, j] = [(h >> i) & 1 for i in range(n)]
    return ph, pd, hh, hd


# -- checker --------------------------------------------------------------------------------
def _bits_of(word: int, width: int) -> list[int]:
    return [(word >> i) & 1 for i in range(width)]


class PrbsChecker:
    """Word-level model of the RTL checker (see the module docstring for the behaviour).

    State after reset: hunting, history 0, LFSR 0, counters 0.
    """

    def __init__(self, order: int = 31, data_width: int = 64):
        self.m, self.n = prbs_taps(order)
        if int(data_width) < 1:
            raise ValueError(f"data_width={data_width} must be positive")
        self.order = order
        self.data_width = int(data_width)
        self.lock_words = -(-LOCK_BITS // self.data_width)
        self.block_words = -(-BLOCK_BITS // self.data_width)
        self.locked = False
        self.hist = 0
        self.lfsr = 0
        self.clean = 0
        self.block_count = 0
        self.block_errors = 0
        self.errors = 0

    def step(self, word: int) -> tuple[int, bool]:
        """Check one received word; returns ``(bit errors counted, locked after)``."""
        w = self.data_width
        bits = _bits_of(int(word), w)
        counted = 0
        if self.locked:
            pred, self.lfsr = prbs_bits_ref(self.order, w, self.lfsr)
            counted = sum(p ^ b for p, b in zip(pred, bits))
            self.errors = min(ERRORS_MAX, self.errors + counted)
            self.block_errors += counted
            self.block_count += 1
            _, self.hist = predict_bits_ref(self.order, bits, self.hist)
            if self.block_count == self.block_words:
                if 4 * self.block_errors > self.block_words * w:
                    self.locked = False
                    self.clean = 0
                self.block_count = 0
                self.block_errors = 0
        else:
            pred, self.hist = predict_bits_ref(self.order, bits, self.hist)
            if any(p ^ b for p, b in zip(pred, bits)):
                self.clean = 0
            else:
                self.clean += 1
            if self.clean >= self.lock_words:
                self.locked = True
                self.lfsr = self.hist
                self.block_count = 0
                self.block_errors = 0
        return counted, self.locked

    def run(self, words: Sequence[int]) -> list[tuple[int, bool]]:
        return [self.step(w) for w in words]


# -- vectors --------------------------------------------------------------------------------
def _vectors_prbs(params: dict, seed: int, count: int) -> dict:
    known = {"order", "data_width", "state"}
    for key in params:
        if key not in known:
            raise ValueError(f"unknown parameter {key!r} (known: {', '.join(sorted(known))})")
    values = {}
    for key, default in (("order", "31"), ("data_width", "64")):
        try:
            values[key] = int(params.get(key, default), 0)
        except ValueError:
            raise ValueError(f"{key}={params[key]!r} is not an integer") from None
    order, width = values["order"], values["data_width"]
    m, n = prbs_taps(order)
    if width < 1:
        raise ValueError(f"data_width={width} must be positive")
    if "state" in params:
        try:
            state = int(params["state"], 0)
        except ValueError:
            raise ValueError(f"state={params['state']!r} is not an integer") from None
        state = _check_state(order, state)
    else:
        state = (1 << n) - 1
    words, _ = prbs_words(order, width, count, state)
    return {"params": {"order": order, "data_width": width,
                       "polynomial": f"x^{n} + x^{m} + 1", "taps": [m, n], "state": state,
                       "bit_order": "bit 0 of each word first in time"},
            "vectors": [{"index": i, "data": w} for i, w in enumerate(words)]}


VECTORS = {"prbs": _vectors_prbs}
