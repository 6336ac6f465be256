"""Reed-Solomon RS(544,514) "KP4" golden model (IEEE 802.3 cl. 91.5.2.7, cl. 119.2.4.6), numpy.

Code
----
- Symbols are elements of GF(2^10) built on the primitive polynomial
  p(x) = x^10 + x^3 + 1 (:data:`PRIM_POLY` = ``0x409``); alpha = x, i.e. the integer 2.
  A symbol is an integer 0..1023 whose bit ``k`` is the coefficient of x^k.
- The generator is g(x) = prod_{i=0}^{29} (x - alpha^i) (:data:`FIRST_ROOT` = 0,
  :data:`NPAR` = 30 roots), monic, degree 30; t = :data:`T` = 15 symbol errors.
- A codeword is 544 symbols, ``cw[0]`` first on the wire. ``cw[k]`` is the coefficient of
  x^(543-k) of c(x): the message is ``cw[0:514]`` (m(x), highest degree first) and the
  parity ``cw[514:544]`` is p(x) = m(x) x^30 mod g(x), highest degree first
  (systematic, as cl. 91.5.2.7 writes c(x) = m(x) x^30 + p(x)).
- The code is a shortened RS(1023, 993): 479 leading zero symbols are implied. GF(2^10) has
  no 544th roots of unity, so no cyclic length-544 RS code exists; the shortened code is the
  one 802.3 uses.

Decoder (:func:`decode`)
------------------------
1. Syndromes ``S_j = r(alpha^(FIRST_ROOT + j))``, j = 0..29 (:func:`syndromes`).
2. Berlekamp-Massey (:func:`berlekamp_massey`), the textbook form with division
   (Massey 1969; Blahut, *Algebraic Codes for Data Transmission*, 2003, sec. 7.6), which
   returns the error locator normalised to ``lambda_[0] == 1``:
   Lambda(x) = prod_k (1 - X_k x) with X_k = alpha^(543 - position_k). The error evaluator
   is Omega(x) = S(x) Lambda(x) mod x^30, S(x) = sum_j S_j x^j. An RTL decoder that runs
   the inversionless BM (reformulated iBM, Sarwate and Shanbhag 2001) finds
   c * Lambda and c * Omega for one non-zero constant c: compare after dividing both by
   their constant term ``lambda_[0]``.
3. Chien search (:func:`chien`) over every non-zero field element, so that a root that
   points outside the shortened range (position < 0) is seen.
4. Forney (:func:`forney`) with first root b = 0:
   e_k = X_k^(1-b) Omega(X_k^-1) / Lambda'(X_k^-1) = X_k Omega(X_k^-1) / Lambda'(X_k^-1).

A word is uncorrectable (``ok=False``, the input returned unchanged) when deg Lambda > T,
when the Chien search finds fewer distinct roots than deg Lambda, or when a root points
outside the 544 transmitted positions.

Bit order (:func:`symbol_bits`): a symbol goes on the wire least significant bit first
(:data:`SYMBOL_LSB_FIRST`): the message bit stream ``b[0], b[1], ...`` (the transcoded
blocks, 257 bits each, ``b[0]`` first) fills ``cw[0]`` with ``b[0]`` in bit 0 up to ``b[9]``
in bit 9, then ``cw[1]``, and so on. The public text found does not state this order for
cl. 91.5.2.7; it is the profile's choice (docs/fec.md), kept in this one constant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# the code's definition (field, sizes, generator), shared with the RTL
from fusionfabric.formats.fec import (EXP, FIRST_ROOT, GENERATOR, K, LOG, M, N, NPAR,  # noqa: F401
                                      PRIM_POLY, Q, SHORTEN, SYMBOL_LSB_FIRST, T)

__all__ = [
    "M", "N", "K", "NPAR", "T", "PRIM_POLY", "FIRST_ROOT", "Q", "SHORTEN", "SYMBOL_LSB_FIRST",
    "EXP", "LOG", "gf_mul", "gf_inv", "gf_pow", "gf_div", "poly_eval", "GENERATOR",
    "encode", "syndromes", "berlekamp_massey", "chien", "forney", "DecodeResult", "decode",
    "decode_batch", "BatchResult", "symbol_bits", "bits_symbols", "check_symbols",
]


def check_symbols(a, name: str = "symbols") -> np.ndarray:
    """Return ``a`` as an int64 array; ``ValueError`` naming a value outside 0..1023."""
    arr = np.asarray(a)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = (arr < 0) | (arr > Q)
    if bad.any():
        raise ValueError(f"{name} holds {int(arr[bad].flat[0])}, outside 0..{Q}")
    return arr


def gf_mul(a, b):
    """Product in GF(2^10), elementwise over broadcast numpy arrays (or two ints)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    r = EXP[LOG[a] + LOG[b]]
    r = np.where((a == 0) | (b == 0), 0, r)
    return int(r) if r.ndim == 0 else r


def gf_inv(a):
    """Multiplicative inverse; ``ZeroDivisionError`` for 0."""
    a = np.asarray(a, dtype=np.int64)
    if (a == 0).any():
        raise ZeroDivisionError("0 has no inverse in GF(2^10)")
    r = EXP[(Q - LOG[a]) % Q]
    return int(r) if r.ndim == 0 else r


def gf_div(a, b):
    """a / b; ``ZeroDivisionError`` when any b is 0."""
    return gf_mul(a, gf_inv(b))


def gf_pow(a, n):
    """a^n for integer n (negative allowed for a != 0); 0^0 = 1."""
    a = np.asarray(a, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    if ((a == 0) & (n < 0)).any():
        raise ZeroDivisionError("0 to a negative power")
    r = EXP[(LOG[a] * n) % Q]
    r = np.where(a == 0, np.where(n == 0, 1, 0), r)
    return int(r) if r.ndim == 0 else r


def poly_eval(poly, x):
    """Evaluate ``poly`` (lowest degree first) at every element of ``x`` (Horner)."""
    x = np.asarray(x, dtype=np.int64)
    acc = np.zeros(x.shape, dtype=np.int64)
    for c in reversed(list(np.asarray(poly, dtype=np.int64))):
        acc = gf_mul(acc, x) ^ int(c)
    return acc


def encode(msg) -> np.ndarray:
    """Systematic encoding: ``(..., 514)`` message symbols -> ``(..., 544)`` codewords.

    The parity is the remainder of m(x) x^30 divided by g(x), computed by the division
    register (a 30-stage LFSR), vectorized over the batch.
    """
    m = check_symbols(msg, "msg")
    if m.ndim == 0 or m.shape[-1] != K:
        raise ValueError(f"msg has shape {m.shape}; the last axis must be {K} symbols")
    batch = m.reshape(-1, K)
    reg = np.zeros((batch.shape[0], NPAR), dtype=np.int64)   # reg[:, 0] is the x^29 term
    log_g = LOG[GENERATOR[1:]]                                # g_29 .. g_0, all non-zero
    for i in range(K):
        fb = batch[:, i] ^ reg[:, 0]
        lf = LOG[fb]
        prod = EXP[lf[:, None] + log_g[None, :]]
        prod[fb == 0] = 0
        reg[:, :-1] = reg[:, 1:] ^ prod[:, :-1]
        reg[:, -1] = prod[:, -1]
    return np.concatenate([batch, reg], axis=1).reshape(m.shape[:-1] + (N,))


# alpha^(j * (N-1-k)) for the syndrome of position k: exponent table (NPAR, N).
_SYN_EXP = ((FIRST_ROOT + np.arange(NPAR))[:, None] * (N - 1 - np.arange(N))[None, :]) % Q


def syndromes(cw) -> np.ndarray:
    """``(..., 544)`` received words -> ``(..., 30)`` syndromes S_j = r(alpha^(FIRST_ROOT+j))."""
    r = check_symbols(cw, "cw")
    if r.ndim == 0 or r.shape[-1] != N:
        raise ValueError(f"cw has shape {r.shape}; the last axis must be {N} symbols")
    batch = r.reshape(-1, N)
    out = np.zeros((batch.shape[0], NPAR), dtype=np.int64)
    for b in range(batch.shape[0]):
        nz = np.flatnonzero(batch[b])
        if nz.size == 0:
            continue
        terms = EXP[(LOG[batch[b, nz]][None, :] + _SYN_EXP[:, nz]) % Q]
        out[b] = np.bitwise_xor.reduce(terms, axis=1)
    return out.reshape(r.shape[:-1] + (NPAR,))


def berlekamp_massey(synd) -> tuple[np.ndarray, np.ndarray]:
    """Error locator and evaluator from 30 syndromes, both lowest degree first.

    Berlekamp-Massey with division (Massey 1969), ``lambda_[0] == 1``. ``lambda_`` is
    trimmed to its degree + 1 coefficients (at least one); ``omega`` = S(x) Lambda(x)
    mod x^30, trimmed the same way (all-zero syndromes give ``[1]`` and ``[0]``).
    """
    s = [int(v) for v in check_symbols(synd, "synd").reshape(-1)]
    if len(s) != NPAR:
        raise ValueError(f"synd has {len(s)} symbols, expected {NPAR}")
    exp, log = EXP, LOG
    lam = [1] + [0] * NPAR
    prev = [1] + [0] * NPAR
    length, shift, b_disc = 0, 1, 1
    for n in range(NPAR):
        d = s[n]
        for i in range(1, length + 1):
            if lam[i] and s[n - i]:
                d ^= int(exp[log[lam[i]] + log[s[n - i]]])
        if d == 0:
            shift += 1
            continue
        coef_log = (log[d] - log[b_disc]) % Q           # d / b
        new = lam[:]
        for i in range(NPAR + 1 - shift):
            if prev[i]:
                new[i + shift] ^= int(exp[coef_log + log[prev[i]]])
        if 2 * length <= n:
            prev, length, b_disc, shift = lam, n + 1 - length, d, 1
        else:
            shift += 1
        lam = new
    lam_arr = np.array(lam, dtype=np.int64)
    omega = [0] * NPAR
    for i, li in enumerate(lam):
        if li == 0:
            continue
        for j in range(NPAR - i):
            if s[j]:
                omega[i + j] ^= int(exp[log[li] + log[s[j]]])
    return _trim(lam_arr), _trim(np.array(omega, dtype=np.int64))


def _trim(p: np.ndarray) -> np.ndarray:
    nz = np.flatnonzero(p)
    return p[: (nz[-1] + 1 if nz.size else 1)].copy()


# Chien search points: x = alpha^(-e) for e = 0..Q-1; position = N-1-e (negative = outside).
_CHIEN_LOGX = (-np.arange(Q)) % Q


def chien(lambda_) -> np.ndarray:
    """Roots of Lambda as codeword positions (0 = first transmitted symbol), ascending.

    Every non-zero field element is tried. A root alpha^(-e) is the locator X = alpha^e of
    position ``543 - e``; a root with e > 543 lies in the implied zero symbols and is
    returned as a negative position, which :func:`decode` treats as uncorrectable.
    """
    lam = check_symbols(lambda_, "lambda_").reshape(-1)
    acc = np.zeros(Q, dtype=np.int64)
    for i, c in enumerate(lam):
        if c:
            acc ^= EXP[(LOG[c] + i * _CHIEN_LOGX) % Q]
    e = np.flatnonzero(acc == 0)
    return np.sort(N - 1 - e)


def forney(lambda_, omega, positions) -> np.ndarray:
    """Error magnitudes at ``positions`` (b = FIRST_ROOT = 0): X Omega(X^-1) / Lambda'(X^-1)."""
    lam = check_symbols(lambda_, "lambda_").reshape(-1)
    om = check_symbols(omega, "omega").reshape(-1)
    pos = np.asarray(positions, dtype=np.int64).reshape(-1)
    e = N - 1 - pos
    x = EXP[e % Q]
    xinv = EXP[(-e) % Q]
    # formal derivative in characteristic 2: keep the odd-degree terms, lowered by one
    deriv = np.zeros(max(len(lam) - 1, 1), dtype=np.int64)
    deriv[0::2][: len(lam[1::2])] = lam[1::2]
    num = poly_eval(om, xinv)
    den = poly_eval(deriv, xinv)
    if (den == 0).any():
        raise ZeroDivisionError("Lambda'(X^-1) = 0: repeated root, not a valid locator")
    mag = gf_mul(gf_mul(x, num), gf_inv(den))
    mag = np.asarray(mag, dtype=np.int64)
    if FIRST_ROOT != 0:
        mag = gf_mul(mag, EXP[((1 - FIRST_ROOT) * e - e) % Q])
    return mag


@dataclass(frozen=True)
class DecodeResult:
    """Result of :func:`decode`.

    Attributes: ``codeword`` (544 corrected symbols, or the input unchanged when not
    ``ok``), ``ok`` (False: uncorrectable), ``n_errors`` (symbols corrected; 0 when not
    ``ok``), ``positions`` (corrected positions, ascending; empty when not ``ok``).
    """
    codeword: np.ndarray
    ok: bool
    n_errors: int
    positions: np.ndarray


def _decode_one(r: np.ndarray, s: np.ndarray) -> DecodeResult:
    none = np.zeros(0, dtype=np.int64)
    if not s.any():
        return DecodeResult(r.copy(), True, 0, none)
    lam, om = berlekamp_massey(s)
    deg = len(lam) - 1
    if deg > T or deg == 0:
        return DecodeResult(r.copy(), False, 0, none)
    pos = chien(lam)
    if len(pos) != deg or (pos < 0).any():
        return DecodeResult(r.copy(), False, 0, none)
    mag = forney(lam, om, pos)
    out = r.copy()
    out[pos] ^= mag
    return DecodeResult(out, True, int(np.count_nonzero(mag)), pos[mag != 0])


def decode(cw) -> DecodeResult:
    """Decode one received word of 544 symbols (see the module docstring)."""
    r = check_symbols(cw, "cw")
    if r.shape != (N,):
        raise ValueError(f"cw has shape {r.shape}, expected ({N},); use decode_batch")
    return _decode_one(r, syndromes(r))


@dataclass(frozen=True)
class BatchResult:
    """Result of :func:`decode_batch`: ``codewords`` (B, 544), ``ok`` (B,) bool,
    ``n_errors`` (B,) symbols corrected (0 where not ok)."""
    codewords: np.ndarray
    ok: np.ndarray
    n_errors: np.ndarray


def decode_batch(cw) -> BatchResult:
    """Decode ``(B, 544)`` received words; words with zero syndromes skip the decoder."""
    r = check_symbols(cw, "cw")
    if r.ndim != 2 or r.shape[1] != N:
        raise ValueError(f"cw has shape {r.shape}, expected (B, {N})")
    s = syndromes(r)
    out = r.copy()
    ok = np.ones(r.shape[0], dtype=bool)
    nerr = np.zeros(r.shape[0], dtype=np.int64)
    for b in np.flatnonzero(s.any(axis=1)):
        res = _decode_one(r[b], s[b])
        out[b] = res.codeword
        ok[b] = res.ok
        nerr[b] = res.n_errors
    return BatchResult(out, ok, nerr)


_BIT_WEIGHTS = np.arange(M) if SYMBOL_LSB_FIRST else np.arange(M)[::-1]


def symbol_bits(symbols) -> np.ndarray:
    """``(..., n)`` symbols -> ``(..., 10 n)`` bits (uint8) in transmission order."""
    s = check_symbols(symbols, "symbols")
    bits = (s[..., None] >> _BIT_WEIGHTS) & 1
    return bits.reshape(s.shape[:-1] + (s.shape[-1] * M,)).astype(np.uint8)


def bits_symbols(bits) -> np.ndarray:
    """``(..., 10 n)`` bits in transmission order -> ``(..., n)`` symbols (inverse of
    :func:`symbol_bits`)."""
    b = np.asarray(bits)
    if b.ndim == 0 or b.shape[-1] % M:
        raise ValueError(f"bits has shape {b.shape}; the last axis must be a multiple of {M}")
    if ((b != 0) & (b != 1)).any():
        raise ValueError("bits must be 0 or 1")
    b = b.astype(np.int64).reshape(b.shape[:-1] + (b.shape[-1] // M, M))
    return (b << _BIT_WEIGHTS).sum(axis=-1)
