"""Self-synchronizing scrambler and descrambler (IEEE 802.3 cl. 49.2.6), pure numpy.

Bit order (802.3 cl. 49): bit 0 of a data word is the first bit on the wire. For the default
polynomial G(x) = 1 + x^39 + x^58, for each bit in transmission order::

    scrambler:    out = in ^ s[38] ^ s[57];  then out is shifted into s[0]
    descrambler:  out = in ^ s[38] ^ s[57];  then in  is shifted into s[0]

A polynomial is an integer with bit k set for each term x^k; it must contain the constant
term 1. Its degree is the state width and every other term x^k is a tap on ``s[k-1]``.

The state is an integer with bit k holding ``s[k]`` (``s[0]`` is the most recent bit). Every
function takes the state before the first word and returns the state after the last one, so
a stream can be scrambled in pieces.

Three implementations share this definition:

- :func:`scramble_bits` / :func:`descramble_bits`: the per-bit reference, written exactly as
  the standard states it (slow, obviously right).
- :func:`scramble` / :func:`descramble`: the fast word version. It unpacks the words into one
  bit array; the descrambler is a vectorized FIR; the scrambler (an IIR) is computed in
  blocks of ``min(taps)`` bits, then of ``2^j * min(taps)`` bits with the squared
  polynomial (:func:`iir_fill`).
- :func:`step_matrices`: the GF(2) matrices of one ``data_width``-bit cycle, obtained by
  probing the per-bit reference with unit vectors. The RTL generates its XOR equations
  from these matrices.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from fusionfabric.formats.primitives import POLY_CL49, poly_taps

__all__ = ["scramble_bits", "descramble_bits", "scramble",
           "descramble", "step_matrices", "words_to_bits", "bits_to_words", "iir_fill",
           "VECTORS"]

def _check(data_width: int, polynomial: int, state: int) -> tuple[int, tuple[int, ...]]:
    if int(data_width) < 1:
        raise ValueError(f"data_width={data_width} must be positive")
    n, taps = poly_taps(polynomial)
    if not 0 <= int(state) < (1 << n):
        raise ValueError(f"state={state:#x} does not fit in {n} bits")
    return n, taps


# -- per-bit reference ----------------------------------------------------------------------
def scramble_bits(bits: Iterable[int], state: int = 0, polynomial: int = POLY_CL49):
    """Scramble bits in transmission order; returns ``(out_bits, state)``."""
    n, taps = poly_taps(polynomial)
    mask = (1 << n) - 1
    out = []
    for b in bits:
        o = int(b) & 1
        for k in taps:
            o ^= (state >> (k - 1)) & 1
        out.append(o)
        state = ((state << 1) | o) & mask
    return out, state


def descramble_bits(bits: Iterable[int], state: int = 0, polynomial: int = POLY_CL49):
    """Descramble received bits in transmission order; returns ``(out_bits, state)``."""
    n, taps = poly_taps(polynomial)
    mask = (1 << n) - 1
    out = []
    for b in bits:
        b = int(b) & 1
        o = b
        for k in taps:
            o ^= (state >> (k - 1)) & 1
        out.append(o)
        state = ((state << 1) | b) & mask
    return out, state


# -- word <-> bit conversion ----------------------------------------------------------------
def words_to_bits(words: Sequence[int], data_width: int) -> np.ndarray:
    """Words (bit 0 first) to one ``uint8`` bit array in transmission order."""
    nbytes = (data_width + 7) // 8
    raw = b"".join(int(w).to_bytes(nbytes, "little") for w in words)
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
    return bits.reshape(len(words), nbytes * 8)[:, :data_width].reshape(-1)


def bits_to_words(bits: np.ndarray, data_width: int) -> list[int]:
    """Inverse of :func:`words_to_bits` (``len(bits)`` a multiple of ``data_width``)."""
    bits = np.asarray(bits, dtype=np.uint8).reshape(-1, data_width)
    nbytes = (data_width + 7) // 8
    padded = np.zeros((bits.shape[0], nbytes * 8), dtype=np.uint8)
    padded[:, :data_width] = bits
    packed = np.packbits(padded, axis=1, bitorder="little")
    return [int.from_bytes(row.tobytes(), "little") for row in packed]


def _state_bits(state: int, n: int) -> np.ndarray:
    # history in time order: oldest first; s[n-1] is the oldest, s[0] the newest.
    return np.array([(state >> (n - 1 - i)) & 1 for i in range(n)], dtype=np.uint8)


def _bits_state(history: np.ndarray, n: int) -> int:
    last = history[-n:]
    state = 0
    for b in last:  # oldest first
        state = (state << 1) | int(b)
    return state


# -- fast word version ----------------------------------------------------------------------
def _xor_shifted(y: np.ndarray, shifts) -> np.ndarray:
    """``y ^ y[t - s]`` for each shift ``s`` (zero before the start)."""
    out = y.copy()
    for s_ in shifts:
        if s_ < len(y):
            out[s_:] ^= y[:len(y) - s_]
    return out


def iir_fill(buf: np.ndarray, offset: int, drive: np.ndarray | None, taps) -> None:
    """Fill ``buf[offset + t]`` for ``t >= 0`` with ``drive[t] ^ XOR(buf[offset + t - k])``.

    ``buf[:offset]`` holds the history (at least ``max(taps)`` bits); ``drive`` is None for
    an autonomous LFSR. Vectorized: the first ``2^j * max(taps)`` bits in blocks of
    ``min(taps)`` bits (no bit of a block depends on another), the rest with the squared
    recurrence ``p(x)^(2^j)``: ``buf[t] = (drive * p^(2^j - 1))[t] ^ XOR(buf[t - 2^j k])``,
    valid from ``t >= (2^j - 1) * max(taps)``, in blocks of ``2^j * min(taps)`` bits.
    """
    total = len(buf) - offset
    lo, hi = min(taps), max(taps)
    j = max(0, int(np.log2(2048 / lo))) if total > 4 * 2048 else 0
    head = min(total, (1 << j) * hi) if j else total
    for start in range(0, head, lo):
        stop = min(start + lo, head)
        acc = drive[start:stop].copy() if drive is not None else np.zeros(stop - start,
                                                                           np.uint8)
        for k in taps:
            acc ^= buf[offset + start - k:offset + stop - k]
        buf[offset + start:offset + stop] = acc
    if head >= total:
        return
    if drive is not None:
        y = drive
        for level in range(j):
            y = _xor_shifted(y, [(1 << level) * k for k in taps])
    step = (1 << j) * lo
    big = [(1 << j) * k for k in taps]
    for start in range(head, total, step):
        stop = min(start + step, total)
        acc = y[start:stop].copy() if drive is not None else np.zeros(stop - start, np.uint8)
        for k in big:
            acc ^= buf[offset + start - k:offset + stop - k]
        buf[offset + start:offset + stop] = acc


def scramble(words: Sequence[int], data_width: int, state: int = 0,
             polynomial: int = POLY_CL49) -> tuple[list[int], int]:
    """Scramble ``data_width``-bit words; returns ``(out_words, state_after)``."""
    n, taps = _check(data_width, polynomial, state)
    data = words_to_bits(words, data_width)
    buf = np.concatenate([_state_bits(state, n), np.zeros(len(data), dtype=np.uint8)])
    iir_fill(buf, n, data, taps)
    return bits_to_words(buf[n:], data_width), _bits_state(buf, n)


def descramble(words: Sequence[int], data_width: int, state: int = 0,
               polynomial: int = POLY_CL49) -> tuple[list[int], int]:
    """Descramble ``data_width``-bit words; returns ``(out_words, state_after)``."""
    n, taps = _check(data_width, polynomial, state)
    data = words_to_bits(words, data_width)
    buf = np.concatenate([_state_bits(state, n), data])
    out = data.copy()
    for k in taps:
        out ^= buf[n - k:n - k + len(data)]
    return bits_to_words(out, data_width), _bits_state(buf, n)


# -- parallel equations ---------------------------------------------------------------------
def step_matrices(data_width: int, polynomial: int = POLY_CL49, descrambler: bool = False):
    """GF(2) matrices of one ``data_width``-bit cycle, from the per-bit reference.

    Returns ``(out_from_state, out_from_data, next_from_state, next_from_data)`` as
    ``uint8`` arrays of shapes ``(W, n)``, ``(W, W)``, ``(n, n)``, ``(n, W)``: output bit
    ``i`` is the XOR of state bits ``j`` where ``out_from_state[i, j]`` and data bits ``j``
    where ``out_from_data[i, j]``; likewise for the next state. The cycle is linear over
    GF(2), so probing the reference with each unit vector gives the matrices exactly.
    """
    n, _ = _check(data_width, polynomial, 0)
    fn = descramble_bits if descrambler else scramble_bits
    w = int(data_width)
    os_ = np.zeros((w, n), dtype=np.uint8)
    od = np.zeros((w, w), dtype=np.uint8)
    ns = np.zeros((n, n), dtype=np.uint8)
    nd = np.zeros((n, w), dtype=np.uint8)
    zeros = [0] * w
    for j in range(n):
        out, st = fn(zeros, 1 << j, polynomial)
        os_[:, j] = out
        ns[:, j] = [(st >> i) & 1 for i in range(n)]
    for j in range(w):
        bits = [0] * w
        bits[j] = 1
        out, st = fn(bits, 0, polynomial)
        od[:, j] = out
        nd[:, j] = [(st >> i) & 1 for i in range(n)]
    return os_, od, ns, nd


# -- vectors --------------------------------------------------------------------------------
def _vectors_scrambler(params: dict, seed: int, count: int) -> dict:
    known = {"data_width", "polynomial", "words", "descrambler"}
    for key in params:
        if key not in known:
            raise ValueError(f"unknown parameter {key!r} (known: {', '.join(sorted(known))})")
    try:
        width = int(params.get("data_width", "64"), 0)
    except ValueError:
        raise ValueError(f"data_width={params['data_width']!r} is not an integer") from None
    try:
        poly = int(params.get("polynomial", str(POLY_CL49)), 0)
    except ValueError:
        raise ValueError(f"polynomial={params['polynomial']!r} is not an integer") from None
    try:
        nwords = int(params.get("words", "16"), 0)
    except ValueError:
        raise ValueError(f"words={params['words']!r} is not an integer") from None
    if nwords < 1:
        raise ValueError(f"words={nwords} must be positive")
    desc = str(params.get("descrambler", "false")).lower()
    if desc not in ("true", "false", "1", "0"):
        raise ValueError(f"descrambler={params['descrambler']!r} is not true or false")
    desc = desc in ("true", "1")
    n, taps = _check(width, poly, 0)
    rng = np.random.default_rng(seed)
    vectors = []
    for _ in range(count):
        state = int.from_bytes(rng.bytes((n + 7) // 8), "little") & ((1 << n) - 1)
        words = [int.from_bytes(rng.bytes((width + 7) // 8), "little") & ((1 << width) - 1)
                 for _ in range(nwords)]
        fn = descramble if desc else scramble
        out, after = fn(words, width, state, poly)
        vectors.append({"state": state, "in": words, "out": out, "state_after": after})
    return {"params": {"data_width": width, "polynomial": poly, "state_width": n,
                       "taps": list(taps), "words": nwords, "descrambler": desc,
                       "bit_order": "bit 0 of each word first on the wire"},
            "vectors": vectors}


VECTORS = {"scrambler": _vectors_scrambler}
