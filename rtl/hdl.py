"""HDL helpers shared by the RTL blocks: comparisons, saturating counters, GF(2) networks.

The GF(2) matrices here are derived from the definitions of the linear circuits (the shift
register recurrences of IEEE 802.3 cl. 49.2.6 and ITU-T O.150, the Galois CRC register of
the reveng model), by matrix algebra over GF(2). The numpy golden models in
``fusionfabric.sim`` keep their own bit-serial references, so a test that compares the RTL
with a model compares two independent computations.
"""

from __future__ import annotations

import numpy as np
from amaranth import Const, Module, Signal, Value

__all__ = ["eq", "popcount", "sat_inc", "xor_tree", "gf2_product", "gf2_matmul", "gf2_power",
           "gf2_inverse", "shift_register_matrices", "galois_step_matrix", "gf2_apply_int"]


# -- comparisons and counters ------------------------------------------------------------------
def eq(value: Value, const: int) -> Value:
    """``value == const``, written as ``~value.any()`` for 0 (Yosys would emit a logical
    ``!`` on a multi-bit value, which Verilator -Wall flags as WIDTHTRUNC)."""
    return ~value.any() if const == 0 else value == const


def sat_inc(m: Module, counter: Signal, cond=None) -> None:
    """``counter += 1`` (in ``m.d.sync``), saturating at all ones; only on ``cond`` if given."""
    top = (1 << len(counter)) - 1
    with m.If(counter != top if cond is None else cond & (counter != top)):
        m.d.sync += counter.eq(counter + 1)


# -- GF(2) networks ----------------------------------------------------------------------------
def xor_tree(terms: list) -> Value:
    """XOR of ``terms`` as a balanced tree (shallow expressions for wide words)."""
    if not terms:
        return Const(0, 1)
    while len(terms) > 1:
        nxt = [terms[i] ^ terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return terms[0]


def gf2_product(m: Module, *terms: tuple[np.ndarray, Value], const: int = 0,
                name: str = "gf2") -> Signal:
    """XOR network ``M1 @ v1 ^ M2 @ v2 ^ ... ^ const`` over GF(2), driven combinationally in ``m``.

    Each term is ``(matrix, value)`` with ``matrix`` of shape ``(rows, len(value))``; the
    result is a ``rows``-bit Signal, bit ``i`` the XOR of the bits ``j`` of each value
    selected by row ``i``, inverted where bit ``i`` of ``const`` is set. Operands are first
    copied into Signals and each output bit is one balanced XOR tree (shallow expressions
    keep the Amaranth simulator fast).
    """
    rows = terms[0][0].shape[0]
    leaves = []
    for k, (mat, value) in enumerate(terms):
        if isinstance(value, Signal):
            leaves.append((mat, value))
        else:
            sig = Signal(len(value), name=f"{name}_in{k}")
            m.d.comb += sig.eq(value)
            leaves.append((mat, sig))
    out = Signal(rows, name=name)
    for i in range(rows):
        sel = []
        for mat, value in leaves:
            sel += [value[int(j)] for j in np.nonzero(mat[i])[0]]
        if (const >> i) & 1:
            sel.append(Const(1, 1))
        m.d.comb += out[i].eq(xor_tree(sel))
    return out


# -- GF(2) matrix algebra ----------------------------------------------------------------------
def gf2_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` over GF(2), as ``uint8``."""
    return ((a.astype(np.int64) @ b.astype(np.int64)) & 1).astype(np.uint8)


def gf2_power(a: np.ndarray, k: int) -> np.ndarray:
    """``a ** k`` over GF(2) (square matrix, ``k >= 0``), by repeated squaring."""
    if k < 0:
        raise ValueError(f"k={k} must be >= 0")
    out = np.eye(a.shape[0], dtype=np.uint8)
    base = a.astype(np.uint8) & 1
    while k:
        if k & 1:
            out = gf2_matmul(out, base)
        base = gf2_matmul(base, base)
        k >>= 1
    return out


def gf2_inverse(mat: np.ndarray) -> np.ndarray:
    """Inverse of a square GF(2) matrix (Gauss-Jordan); ``ValueError`` if singular."""
    n = mat.shape[0]
    aug = np.concatenate([mat.astype(np.uint8) & 1, np.eye(n, dtype=np.uint8)], axis=1)
    for col in range(n):
        rows = np.nonzero(aug[col:, col])[0]
        if not len(rows):
            raise ValueError("matrix is singular over GF(2)")
        piv = col + rows[0]
        aug[[col, piv]] = aug[[piv, col]]
        others = np.nonzero(aug[:, col])[0]
        others = others[others != col]
        aug[others] ^= aug[col]
    return aug[:, n:]


def shift_register_matrices(n: int, taps, data_width: int, shift_in: str = "out",
                            xor_input: bool = True):
    """GF(2) matrices of ``data_width`` steps of a Fibonacci shift register, input bit 0 first.

    The ``n``-bit state holds the last ``n`` shifted bits, bit ``k`` the one shifted in
    ``k + 1`` steps ago. Each step computes ``f = XOR(s[t - 1] for t in taps)``, outputs
    ``o = x ^ f`` (``o = f`` when ``xor_input`` is false) and shifts ``o``
    (``shift_in="out"``: scrambler, pattern generator) or the input ``x``
    (``shift_in="in"``: descrambler, self-synchronizing predictor) into bit 0.

    Returns ``(out_from_state (W, n), out_from_data (W, W), next_from_state (n, n),
    next_from_data (n, W))`` as ``uint8`` arrays. Every bit is tracked symbolically as the
    set of state and input bits it is the XOR of (an integer mask, state bits low).
    """
    if shift_in not in ("out", "in"):
        raise ValueError(f"shift_in={shift_in!r} must be 'out' or 'in'")
    w = int(data_width)
    state = [1 << k for k in range(n)]
    outs = []
    for i in range(w):
        x = 1 << (n + i)
        f = 0
        for t in taps:
            f ^= state[t - 1]
        o = x ^ f if xor_input else f
        outs.append(o)
        state = [o if shift_in == "out" else x] + state[:-1]

    def split(masks):
        rows = len(masks)
        s = np.zeros((rows, n), dtype=np.uint8)
        d = np.zeros((rows, w), dtype=np.uint8)
        for i, mask in enumerate(masks):
            for j in range(n):
                s[i, j] = (mask >> j) & 1
            for j in range(w):
                d[i, j] = (mask >> (n + j)) & 1
        return s, d

    os_, od = split(outs)
    ns, nd = split(state)
    return os_, od, ns, nd


def galois_step_matrix(width: int, poly: int) -> np.ndarray:
    """``(width, width)`` GF(2) matrix of one zero-input step of a Galois (MSB-first) CRC
    register: ``reg = (reg << 1) mod 2**width``, XOR ``poly`` if the old top bit was set."""
    t = np.zeros((width, width), dtype=np.uint8)
    for i in range(1, width):
        t[i, i - 1] = 1
    for i in range(width):
        t[i, width - 1] ^= (poly >> i) & 1
    return t


def gf2_apply_int(matrix: np.ndarray, value: int) -> int:
    """``matrix @ bits(value)`` over GF(2) for a Python integer (elaboration-time constants,
    e.g. a register's reset value); row ``i`` gives bit ``i`` of the result."""
    bits = np.array([(int(value) >> j) & 1 for j in range(matrix.shape[1])], dtype=np.int64)
    res = (matrix.astype(np.int64) @ bits) & 1
    return int(sum(int(b) << i for i, b in enumerate(res)))


def popcount(value: Value) -> Value:
    """Number of set bits of ``value`` (balanced adder tree)."""
    terms = [value[i] for i in range(len(value))]
    if not terms:
        return Value.cast(0)
    while len(terms) > 1:
        nxt = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return terms[0]
