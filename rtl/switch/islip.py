"""iSLIP allocator (McKeown, IEEE/ACM Trans. Networking 7(2), 1999)."""

from __future__ import annotations

import math

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ISLIPAllocator", "max_iterations", "lowest_bit", "round_robin_pick",
           "mask_above", "round_robin_index", "next_pointer"]


def max_iterations(n_ports: int) -> int:
    """The largest allowed iteration count, ``max(1, ceil(log2 n_ports))``."""
    return max(1, math.ceil(math.log2(n_ports)))


def lowest_bit(x, width: int):
    """One-hot lowest set bit of ``x`` (zero when ``x`` is zero): ``x & -x``."""
    return x & (~x + 1)[:width]


def round_robin_pick(req, mask, n: int):
    """One-hot first set bit of ``req`` at or after the pointer whose thermometer mask
    (bits >= pointer set) is ``mask``; wraps around to bit 0."""
    low = lowest_bit(Cat(req & mask, req), 2 * n)
    return low[:n] | low[n:]


def mask_above(onehot, n: int):
    """Thermometer mask of the bits strictly above the set bit of ``onehot`` (the pointer
    one past it; all-zero stands for pointer 0 after the last item, which picks the same)."""
    ones = Const((1 << n) - 1, n)
    return ~(onehot | (onehot + ones)[:n]) & ones


def round_robin_index(req, ptr, n: int):
    """One-hot first set bit of ``req`` at or after the binary pointer ``ptr`` (0 … n-1),
    wrapping around; zero when ``req`` is zero. No carry chain: bit ``j`` is
    ``req[j]`` and none of ``req[ptr … j-1]`` (cyclic), an ``n + log2 n``-input function
    per bit that the LUT mapper flattens (the pipelined switch's arbiters)."""
    out = []
    for j in range(n):
        # blocked[p]: some request strictly between pointer p and j (cyclically)
        blocked = []
        for p in range(n):
            ks = [(p + d) % n for d in range((j - p) % n)]
            blocked.append(Cat(req[k] for k in ks).any() if ks else Const(0, 1))
        sel = Cat((ptr == p) & blocked[p] for p in range(n)).any()
        out.append(req[j] & ~sel)
    return Cat(*out)


def next_pointer(onehot, n: int):
    """Binary pointer one past the set bit of a one-hot ``n``-bit value, modulo ``n``
    (an OR tree; 0 when ``onehot`` is zero)."""
    bits = max(1, (n - 1).bit_length())
    return Cat(Cat(onehot[o] for o in range(n) if ((o + 1) % n >> b) & 1).any()
               if any(((o + 1) % n >> b) & 1 for o in range(n)) else Const(0, 1)
               for b in range(bits))


class ISLIPAllocator(wiring.Component):
    """iSLIP input-output matching for an ``n_ports`` × ``n_ports`` crossbar.

    Parameters
    ----------
    n_ports : int
        Inputs and outputs (2 … 256).
    iterations : int
        Matching rounds per cycle, 1 … ``max(1, ceil(log2 n_ports))``.

    Members
    -------
    i_req : In(n_ports).array(n_ports)
        ``i_req[i]`` bit ``o``: input i has a flit for output o (and o may take it).
    o_match : Out(n_ports).array(n_ports)
        ``o_match[i]``: one-hot output matched to input i this cycle (0: none).
    o_grant : Out(n_ports).array(n_ports)
        ``o_grant[o]``: one-hot input matched to output o this cycle (0: none).

    Timing
    ------
    Combinational: the match of cycle t depends on ``i_req`` in t and on the pointers at
    the start of t. Each round grants, per unmatched output, the requesting unmatched input
    at or after its grant pointer, and accepts, per unmatched input, the granting output at
    or after its accept pointer. Pointers move one past the matched partner only for
    round-1 matches, at the end of t (McKeown 1999, sec. III). Reset: all pointers 0.
    Pointers are kept as thermometer masks (bits >= pointer), an implementation detail.
    """

    def __init__(self, n_ports: int, iterations: int = 1):
        if not isinstance(n_ports, int) or not 2 <= n_ports <= 256:
            raise ValueError(f"n_ports={n_ports!r} must be an integer in 2..256")
        top = max_iterations(n_ports)
        if not isinstance(iterations, int) or not 1 <= iterations <= top:
            raise ValueError(f"iterations={iterations!r} must be in 1..{top} "
                             f"for n_ports={n_ports}")
        self.n_ports = n_ports
        self.iterations = iterations
        super().__init__({
            "i_req": In(n_ports).array(n_ports),
            "o_match": Out(n_ports).array(n_ports),
            "o_grant": Out(n_ports).array(n_ports),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.n_ports
        ones = (1 << n) - 1
        gmask = [Signal(n, init=ones, name=f"gmask{o}") for o in range(n)]
        amask = [Signal(n, init=ones, name=f"amask{i}") for i in range(n)]

        in_free = [Const(1, 1)] * n
        out_free = [Const(1, 1)] * n
        match_in: list = [Const(0, n)] * n
        first_grant = None
        first_accept = None
        for k in range(self.iterations):
            grant = [Signal(n, name=f"g{k}_{o}") for o in range(n)]     # over inputs
            accept = [Signal(n, name=f"a{k}_{i}") for i in range(n)]    # over outputs
            for o in range(n):
                req_o = Cat(self.i_req[i][o] & in_free[i] for i in range(n))
                req_o = req_o & out_free[o].replicate(n)
                m.d.comb += grant[o].eq(round_robin_pick(req_o, gmask[o], n))
            for i in range(n):
                grants_i = Cat(grant[o][i] for o in range(n))
                m.d.comb += accept[i].eq(round_robin_pick(grants_i, amask[i], n))
            if k == 0:
                first_grant, first_accept = grant, accept
            in_taken = [a.any() for a in accept]
            out_taken = [Cat(accept[i][o] for i in range(n)).any() for o in range(n)]
            match_in = [match_in[i] | accept[i] for i in range(n)]
            if k + 1 < self.iterations:
                fi = [Signal(name=f"in_free{k}_{i}") for i in range(n)]
                fo = [Signal(name=f"out_free{k}_{o}") for o in range(n)]
                for i in range(n):
                    m.d.comb += fi[i].eq(in_free[i] & ~in_taken[i])
                for o in range(n):
                    m.d.comb += fo[o].eq(out_free[o] & ~out_taken[o])
                in_free, out_free = fi, fo

        for i in range(n):
            m.d.comb += self.o_match[i].eq(match_in[i])
        for o in range(n):
            m.d.comb += self.o_grant[o].eq(Cat(self.o_match[i][o] for i in range(n)))

        # pointer update: round-1 matches only
        for i in range(n):
            with m.If(first_accept[i].any()):
                m.d.sync += amask[i].eq(mask_above(first_accept[i], n))
        for o in range(n):
            accepted = Cat(first_accept[i][o] for i in range(n)).any()
            with m.If(accepted):
                m.d.sync += gmask[o].eq(mask_above(first_grant[o], n))
        return m
