"""GF(2^10) arithmetic for the RS(544,514) blocks, generated from the code's field tables.

Every constant here comes from the code's definition, :mod:`fusionfabric.formats.fec`
(``EXP``, ``LOG``, ``GENERATOR``): a multiplication by a constant is a 10 x 10 matrix over GF(2) whose column
``j`` is ``c * x^j``, and a linear map over several symbols (a parallel Horner step, a
Chien evaluation, an LFSR advance) is probed symbol bit by symbol bit through :func:`mul`
(the field tables) and built as balanced XOR trees (:func:`fusionfabric.rtl.hdl.gf2_product`).
Only the general multiplier (two variable operands) and the inverse table are built
differently: the multiplier as the AND array of the polynomial product followed by the
reduction modulo p(x) (the reduction matrix is again read from the tables), the inverse as a
1024-entry ROM (``amaranth.lib.memory``) filled from the tables (a^-1 = alpha^(-log a)).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from amaranth import Module, Signal, Value
from amaranth.lib import memory

from fusionfabric.rtl.hdl import gf2_product, xor_tree
from fusionfabric.formats import fec as code

__all__ = ["M", "mul", "alpha_pow", "horner_matrix", "mul_matrix", "linear_matrix", "const_mul", "gf_mul",
           "inverse_rom"]

M = code.M
Q = code.Q


_EXP = [int(v) for v in code.EXP]
_LOG = [int(v) for v in code.LOG]


def mul(a: int, b: int) -> int:
    """``a * b`` on Python ints through the ``EXP``/``LOG`` tables of
    :mod:`fusionfabric.formats.fec`."""
    return 0 if a == 0 or b == 0 else _EXP[_LOG[a] + _LOG[b]]


def alpha_pow(e: int) -> int:
    """alpha^e for any integer e (negative allowed)."""
    return int(code.EXP[e % Q])


def mul_matrix(c: int) -> np.ndarray:
    """The 10 x 10 GF(2) matrix of ``x -> c * x``."""
    mat = np.zeros((M, M), dtype=np.uint8)
    for j in range(M):
        v = mul(int(c), 1 << j)
        mat[:, j] = [(v >> i) & 1 for i in range(M)]
    return mat


def linear_matrix(fn: Callable[[list[int]], list[int]], n_in: int) -> np.ndarray:
    """GF(2) matrix of a GF(2)-linear map from ``n_in`` symbols to some symbols.

    ``fn`` takes a list of ``n_in`` symbols and returns a list of symbols; it is probed
    with every single-bit input. Input symbol ``k`` occupies bits ``10k .. 10k+9`` of the
    input vector, output symbol ``i`` bits ``10i .. 10i+9`` of the output.
    """
    cols = []
    for k in range(n_in):
        for b in range(M):
            x = [0] * n_in
            x[k] = 1 << b
            y = fn(x)
            cols.append([(int(v) >> i) & 1 for v in y for i in range(M)])
    return np.array(cols, dtype=np.uint8).T


def const_mul(m: Module, c: int, value: Value, name: str = "cmul") -> Signal:
    """``c * value`` (10 bits), as XOR trees."""
    return gf2_product(m, (mul_matrix(c), value), name=name)


def _reduction() -> list[list[tuple[int, int]]]:
    """For each product bit ``o``, the operand bit pairs ``(i, j)`` whose x^(i+j) mod p(x)
    has bit ``o`` set (x^k read from ``EXP``, alpha = x)."""
    pairs: list[list[tuple[int, int]]] = [[] for _ in range(M)]
    for i in range(M):
        for j in range(M):
            v = int(code.EXP[i + j])
            for o in range(M):
                if (v >> o) & 1:
                    pairs[o].append((i, j))
    return pairs


_PAIRS = _reduction()


def gf_mul(m: Module, a: Value, b: Value, name: str = "gmul") -> Signal:
    """``a * b`` for two variable 10-bit symbols: AND array and XOR reduction trees."""
    sa, sb = Signal(M, name=f"{name}_a"), Signal(M, name=f"{name}_b")
    out = Signal(M, name=name)
    m.d.comb += [sa.eq(a), sb.eq(b)]
    for o in range(M):
        m.d.comb += out[o].eq(xor_tree([sa[i] & sb[j] for i, j in _PAIRS[o]]))
    return out


def inverse_rom() -> memory.Memory:
    """A 1024 x 10 ROM of ``gf_inv`` (entry 0 holds 0); add one read port per user."""
    init = [0] + [alpha_pow(-int(_LOG[a])) for a in range(1, Q + 1)]
    return memory.Memory(shape=M, depth=Q + 1, init=init)


def horner_matrix(powers: Sequence[int], n_in: int) -> np.ndarray:
    """Matrix of ``(acc, d_0 .. d_{n_in-1}) -> acc * x^n_in + sum_k d_k x^(n_in-1-k)`` evaluated
    at ``x = alpha^p`` for each ``p`` in ``powers`` (one output symbol per power), for a
    single accumulator per power: input ``[acc_p for p in powers] + data``."""
    n_pow = len(powers)

    def fn(v):
        accs, data = v[:n_pow], v[n_pow:]
        out = []
        for j, p in enumerate(powers):
            a = accs[j]
            for d in data:
                a = mul(a, alpha_pow(p)) ^ d
            out.append(a)
        return out

    return linear_matrix(fn, n_pow + n_in)
