"""Golden model of the in-switch reduction units (pure numpy + ml_dtypes).

The numerics and the order are the contract the RTL (:mod:`fusionfabric.rtl.reduce`) is checked against,
bit for bit; docs/reduction.md states them in prose.

Order
    A balanced pairwise tree over the members' ranks (ascending port index), level by
    level: ``[v0 op v1, v2 op v3, ...]``, an odd last element carried up unchanged, until
    one value is left (:func:`tree_reduce`). ``k=3`` gives ``(v0 op v1) op v2``.
Numerics
    IEEE 754 binary32/binary16 and bfloat16 as computed by numpy ``float32`` and
    ``ml_dtypes``: round to nearest even, subnormals kept, overflow to infinity,
    ``inf + -inf`` is NaN, and every NaN result is the canonical quiet NaN of the dtype
    (:data:`fusionfabric.sim.layouts.CANONICAL_QNAN`). MIN/MAX order ``-0 < +0`` and return the canonical
    NaN if either input is NaN. fp16/bf16 accumulate in fp32 and round once at the end
    (``acc::f32``) unless ``native``, which rounds to the narrow type after every operation.
    INT32 SUM wraps modulo 2**32; INT32 MIN/MAX are signed, UINT32 unsigned.

Values are passed around as raw bit patterns (``uint32``/``uint16`` arrays, shape
``(k, n_elements)``) so that NaN payloads and the sign of zero survive.
"""

from __future__ import annotations

from typing import Callable, Sequence

import ml_dtypes
import numpy as np

from fusionfabric.formats.switch import CANONICAL_QNAN, DTYPE_BITS, Dtype, Op

__all__ = [
    "tree_reduce", "tree_shape", "combine", "reduce_bits", "elements_per_flit",
    "unpack_flit", "pack_flit", "reduce_flits", "widen", "narrow", "VECTORS",
    "special_values", "random_bits", "STORAGE", "FLOAT", "ALU_LATENCY", "unit_latency",
    "reduce_bits_tiers",
]

#: numpy dtype of each reduction dtype's values.
FLOAT = {Dtype.FP32: np.dtype(np.float32), Dtype.FP16: np.dtype(np.float16),
         Dtype.BF16: np.dtype(ml_dtypes.bfloat16)}
#: unsigned storage dtype of each reduction dtype's bit patterns.
STORAGE = {Dtype.INT32: np.dtype(np.uint32), Dtype.UINT32: np.dtype(np.uint32),
           Dtype.FP32: np.dtype(np.uint32), Dtype.FP16: np.dtype(np.uint16),
           Dtype.BF16: np.dtype(np.uint16)}


# -- order ---------------------------------------------------------------------------------
def tree_reduce(values: Sequence, fn: Callable):
    """Reduce ``values`` (index = member rank) with ``fn`` in the documented tree order."""
    level = list(values)
    if not level:
        raise ValueError("tree_reduce of zero values")
    while len(level) > 1:
        nxt = [fn(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def tree_shape(k: int) -> str:
    """The tree for ``k`` members as text, e.g. ``((v0+v1)+v2)`` for ``k=3``."""
    return tree_reduce([f"v{i}" for i in range(k)], lambda a, b: f"({a}+{b})")


# -- timing of the hardware unit (rtl/reduce/unit.py uses these; its tests measure them) ----
#: Pipeline stages of one SIMD ALU level (fp32 add 4 + native rounding 1).
ALU_LATENCY = 5


def unit_latency(k: int, n_ports: int, *, add_stages: int = 4, pipeline: bool = False) -> int:
    """Cycles from the handshake of a chunk's last contribution to its result being valid
    on ``o_result`` in an idle ReductionUnit: 1 ingest + 1 ready FIFO + ``k`` rank-ordered
    reads + 1 memory + 1 widening + ``ALU_LATENCY`` per pairing level
    (``ceil(log2 n_ports)`` levels) + 1 output register. An ``add_stages``-stage adder
    adds ``add_stages - 4`` per level; ``pipeline`` adds 2 per level (the lanes' operand
    registers and the native rounding in two stages) and 4 more (the memory written a
    cycle after the table, the memory's output register, the output narrowing in two
    stages)."""
    if not 1 <= k <= n_ports:
        raise ValueError(f"k={k} must be in 1..n_ports={n_ports}")
    depth = max(1, (n_ports - 1).bit_length())
    per_level = ALU_LATENCY + (add_stages - 4) + (2 if pipeline else 0)
    return k + 5 + depth * per_level + (4 if pipeline else 0)


# -- pairwise operations on bit patterns ---------------------------------------------------
def _canon(bits: np.ndarray, fdtype: np.dtype, dtype: Dtype) -> np.ndarray:
    isnan = np.isnan(bits.view(fdtype).astype(np.float32))
    return np.where(isnan, STORAGE[dtype].type(CANONICAL_QNAN[dtype]), bits)


def _float_op(a: np.ndarray, b: np.ndarray, op: Op, fdtype: np.dtype, dtype: Dtype):
    """One elementwise op on bit patterns of float type ``fdtype`` (storage of ``dtype``)."""
    st = STORAGE[dtype] if fdtype != np.float32 else np.dtype(np.uint32)
    a = np.asarray(a, st)
    b = np.asarray(b, st)
    fa, fb = a.view(fdtype), b.view(fdtype)
    with np.errstate(all="ignore"):
        if op == Op.SUM:
            r = (fa + fb).astype(fdtype).view(st)
        elif op in (Op.MIN, Op.MAX):
            r = (np.minimum(fa, fb) if op == Op.MIN else np.maximum(fa, fb)).view(st)
            # IEEE 754 leaves min(+0, -0) open; we order -0 < +0.
            zeros = (fa == 0) & (fb == 0)
            r = np.where(zeros, (a | b) if op == Op.MIN else (a & b), r).astype(st)
        else:
            raise ValueError(f"op={op!r} is not SUM, MIN or MAX")
    nan_dtype = dtype if st == STORAGE[dtype] else Dtype.FP32
    return _canon(r, fdtype, nan_dtype)


def _int_op(a: np.ndarray, b: np.ndarray, op: Op, dtype: Dtype):
    a = np.asarray(a, np.uint32)
    b = np.asarray(b, np.uint32)
    if op == Op.SUM:
        return a + b                                    # wraps modulo 2**32
    if op not in (Op.MIN, Op.MAX):
        raise ValueError(f"op={op!r} is not SUM, MIN or MAX")
    view = np.int32 if dtype == Dtype.INT32 else np.uint32
    va, vb = a.view(view), b.view(view)
    r = np.minimum(va, vb) if op == Op.MIN else np.maximum(va, vb)
    return r.view(np.uint32)


def combine(a, b, dtype, op, native: bool = False):
    """``a op b`` elementwise on bit patterns of ``dtype`` (storage format).

    For fp16/bf16 this is one *native* step (rounded to the narrow type); the ``acc::f32``
    path is :func:`reduce_bits`, which widens first.
    """
    dtype, op = Dtype(dtype), Op(op)
    if dtype in (Dtype.INT32, Dtype.UINT32):
        return _int_op(a, b, op, dtype)
    return _float_op(a, b, op, FLOAT[dtype], dtype)


def widen(bits, dtype) -> np.ndarray:
    """fp16/bf16 bit patterns → fp32 bit patterns (exact); other dtypes unchanged."""
    dtype = Dtype(dtype)
    bits = np.asarray(bits, STORAGE[dtype])
    if dtype in (Dtype.FP16, Dtype.BF16):
        return bits.view(FLOAT[dtype]).astype(np.float32).view(np.uint32)
    return bits


def narrow(bits, dtype) -> np.ndarray:
    """fp32 bit patterns → ``dtype`` (RNE, subnormals, overflow to inf, canonical NaN)."""
    dtype = Dtype(dtype)
    bits = np.asarray(bits, np.uint32)
    if dtype in (Dtype.FP16, Dtype.BF16):
        with np.errstate(all="ignore"):
            r = bits.view(np.float32).astype(FLOAT[dtype]).view(STORAGE[dtype])
        return _canon(r, FLOAT[dtype], dtype)
    if dtype == Dtype.FP32:
        return _canon(bits, np.dtype(np.float32), Dtype.FP32)
    return bits


def reduce_bits(contribs, dtype, op, native: bool = False) -> np.ndarray:
    """Reduce ``contribs`` (shape ``(k, n)``, row = member rank) to one row of bits."""
    dtype, op = Dtype(dtype), Op(op)
    rows = [np.asarray(r, STORAGE[dtype]) for r in np.asarray(contribs)]
    if not rows:
        raise ValueError("reduce_bits needs at least one contribution")
    if dtype in (Dtype.FP16, Dtype.BF16) and not native:
        acc = [widen(r, dtype) for r in rows]
        out = tree_reduce(acc, lambda a, b: _float_op(a, b, op, np.dtype(np.float32),
                                                      Dtype.FP32))
        return narrow(out, dtype)
    out = tree_reduce(rows, lambda a, b: combine(a, b, dtype, op, native))
    if dtype in FLOAT:  # canonical NaN also for k == 1
        out = _canon(out, FLOAT[dtype], dtype)
    return out


# -- flits -----------------------------------------------------------------------------------
def elements_per_flit(data_width: int, dtype) -> int:
    bits = DTYPE_BITS[Dtype(dtype)]
    if data_width % 32 or data_width <= 0:
        raise ValueError(f"data_width={data_width} must be a positive multiple of 32")
    return data_width // bits


def unpack_flit(word: int, data_width: int, dtype) -> np.ndarray:
    """A ``data_width``-bit flit → its elements, LSB first."""
    dtype = Dtype(dtype)
    w = DTYPE_BITS[dtype]
    n = elements_per_flit(data_width, dtype)
    return np.array([(int(word) >> (w * i)) & ((1 << w) - 1) for i in range(n)],
                    dtype=STORAGE[dtype])


def pack_flit(elements, dtype) -> int:
    w = DTYPE_BITS[Dtype(dtype)]
    word = 0
    for i, e in enumerate(np.asarray(elements).tolist()):
        word |= int(e) << (w * i)
    return word


def reduce_flits(words: Sequence[int], data_width: int, dtype, op,
                 native: bool = False) -> int:
    """Reduce one contribution flit per member (rank order) to the result flit data."""
    rows = np.stack([unpack_flit(w, data_width, dtype) for w in words])
    return pack_flit(reduce_bits(rows, dtype, op, native), dtype)


# -- stimulus --------------------------------------------------------------------------------
def special_values(dtype) -> np.ndarray:
    """Edge patterns of ``dtype``: ±0, smallest/largest subnormal and normal, ±inf, NaNs,
    values that overflow when summed; integer extremes for int dtypes."""
    dtype = Dtype(dtype)
    if dtype in (Dtype.INT32, Dtype.UINT32):
        v = [0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x80000001, 2, 0xFFFFFFFE]
        return np.array(v, np.uint32)
    if dtype == Dtype.FP32:
        v = [0x0, 0x80000000, 0x1, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000,
             0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000,
             0xFFC00001, 0x7F800001, 0x3F800000, 0xBF800000, 0x7F000000, 0x33800000]
        return np.array(v, np.uint32)
    if dtype == Dtype.FP16:
        v = [0x0, 0x8000, 0x1, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x7BFF, 0xFBFF,
             0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 0x3C00, 0xBC00, 0x7800, 0x1400]
        return np.array(v, np.uint16)
    v = [0x0, 0x8000, 0x1, 0x8001, 0x007F, 0x807F, 0x0080, 0x8080, 0x7F7F, 0xFF7F, 0x7F80,
         0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x3F80, 0xBF80, 0x7F00, 0x3380]
    return np.array(v, np.uint16)


def reduce_bits_tiers(contribs, dtype, op, group: int, native: bool = False) -> np.ndarray:
    """Two-tier reduction of ``contribs`` (shape ``(k, n)``, row = endpoint rank, ``k`` a
    multiple of ``group``), the order of a Clos's in-network all-reduce: each leaf reduces
    its ``group`` consecutive ranks with :func:`reduce_bits` (the tree over its ports in
    port order; fp16/bf16 accumulate in fp32 and the leaf's partial is rounded once to the
    dtype, since it travels to the spine in a flit of that dtype), then the spine reduces
    the leaves' partials, leaf 0 first, with :func:`reduce_bits` again. With one leaf this
    is :func:`reduce_bits`."""
    rows = np.asarray(contribs)
    if group < 1 or rows.shape[0] % group:
        raise ValueError(f"{rows.shape[0]} contributions are not whole leaves of {group}")
    partials = [reduce_bits(rows[i:i + group], dtype, op, native)
                for i in range(0, rows.shape[0], group)]
    if len(partials) == 1:
        return partials[0]
    return reduce_bits(np.stack(partials), dtype, op, native)


def random_bits(rng: np.random.Generator, dtype, shape, special: float = 0.1,
                spread: bool = True) -> np.ndarray:
    """Random bit patterns of ``dtype``: mostly finite values of similar magnitude (so sums
    round and cancel), a fraction ``special`` drawn from :func:`special_values`, and with
    ``spread`` some fully random patterns (any exponent, subnormals, NaN)."""
    dtype = Dtype(dtype)
    st = STORAGE[dtype]
    n = int(np.prod(shape))
    w = DTYPE_BITS[dtype]
    raw = rng.integers(0, 1 << w, n, dtype=np.uint64).astype(st)
    if dtype in FLOAT:
        vals = rng.normal(0, 1, n) * np.exp2(rng.integers(-3, 4, n))
        near = vals.astype(np.float32).astype(FLOAT[dtype]).view(st)
        pick = rng.random(n) < (0.7 if spread else 1.0)
        raw = np.where(pick, near, raw)
    sp = special_values(dtype)
    raw = np.where(rng.random(n) < special, sp[rng.integers(0, len(sp), n)], raw)
    return raw.astype(st).reshape(shape)


_NAMES_DTYPE = {d.name.lower(): d for d in Dtype}
_NAMES_OP = {o.name.lower(): o for o in Op}


def _parse_int(params, key, default, lo, hi):
    text = params.get(key, default)
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise ValueError(f"{key}={text!r} is not an integer") from None
    if not lo <= value <= hi:
        raise ValueError(f"{key}={value} is outside {lo}..{hi}")
    return value


def _vectors_reduce(params: dict, seed: int, count: int) -> dict:
    """Contributions per member and the expected result, for ``fusionfabric vectors
    reduce --dtype D --op O --members K [--set elements=N --set native=1
    --set special=0.1]``. Bit patterns are integers (elements of the dtype, LSB first in a
    flit)."""
    known = {"dtype", "op", "members", "elements", "native", "special"}
    for key in params:
        if key not in known:
            raise ValueError(f"unknown parameter {key!r} (known: {', '.join(sorted(known))})")
    dname = str(params.get("dtype", "fp32")).lower()
    if dname not in _NAMES_DTYPE:
        raise ValueError(f"dtype={dname!r} is not one of {', '.join(_NAMES_DTYPE)}")
    oname = str(params.get("op", "sum")).lower()
    if oname not in _NAMES_OP:
        raise ValueError(f"op={oname!r} is not one of {', '.join(_NAMES_OP)}")
    members = _parse_int(params, "members", 8, 1, 256)
    elements = _parse_int(params, "elements", 8, 1, 4096)
    native = _parse_int(params, "native", 0, 0, 1)
    try:
        special = float(params.get("special", 0.1))
    except ValueError:
        raise ValueError(f"special={params.get('special')!r} is not a number") from None
    if not 0.0 <= special <= 1.0:
        raise ValueError(f"special={special} is outside 0..1")
    dtype, op = _NAMES_DTYPE[dname], _NAMES_OP[oname]
    rng = np.random.default_rng(seed)
    vectors = []
    for _ in range(count):
        c = random_bits(rng, dtype, (members, elements), special)
        r = reduce_bits(c, dtype, op, bool(native))
        vectors.append({"contributions": c.astype(np.uint64).tolist(),
                        "result": r.astype(np.uint64).tolist()})
    return {"params": {"dtype": dname, "op": oname, "members": members,
                       "elements": elements, "native": native, "special": special,
                       "order": tree_shape(members) if members <= 16 else "pairwise tree"},
            "vectors": vectors}


VECTORS = {"reduce": _vectors_reduce}
