"""In-switch reduction: IEEE 754 / integer arithmetic units, the SIMD ALU over a flit, and
the :class:`~rtl.reduce.unit.ReductionUnit` (block ``reduce-unit``).

Numerics and order are defined by the golden model :mod:`fusionfabric.sim.reduce` and documented in
docs/reduction.md.
"""
