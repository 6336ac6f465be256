"""GF(2) equations of one 64-bit step of the cl. 49 scrambler/descrambler, generated from
the software model (:func:`sim.pcs.scramble_matrices`), never typed in by hand.

(Private to the PCS until the project's shared scrambler is committed.)
"""

from __future__ import annotations

from functools import lru_cache

from amaranth.hdl import Cat, Const, Value

from sim.pcs import scramble_matrices

__all__ = ["scrambler_step"]


@lru_cache(maxsize=None)
def _taps(descrambler: bool):
    os_, od, ns, nd = scramble_matrices(descrambler)
    out = [(tuple(os_[i].nonzero()[0]), tuple(od[i].nonzero()[0])) for i in range(64)]
    nxt = [(tuple(ns[i].nonzero()[0]), tuple(nd[i].nonzero()[0])) for i in range(58)]
    return out, nxt


def _xor(state: Value, data: Value, terms) -> Value:
    s_idx, d_idx = terms
    bits = [state[int(j)] for j in s_idx] + [data[int(j)] for j in d_idx]
    return Cat(*bits).xor() if bits else Const(0, 1)


def scrambler_step(state: Value, data: Value, descrambler: bool = False):
    """``(out, next_state)`` of one 64-bit cycle of G(x) = 1 + x^39 + x^58, bit 0 of
    ``data`` first on the wire; ``state`` bit ``k`` is ``s[k]`` (``s[0]`` newest)."""
    out, nxt = _taps(bool(descrambler))
    return (Cat(*[_xor(state, data, t) for t in out]),
            Cat(*[_xor(state, data, t) for t in nxt]))
