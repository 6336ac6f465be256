"""Formal verification of fusionfabric's protocol promises (SymbiYosys, Amaranth harnesses).

Harnesses (one module each, registered in :data:`fusionfabric.formal.flow.HARNESSES`):

``trivial``
    The flow itself: a true invariant over free inputs passes, a false one fails, and a
    free input tied to a constant is caught by its cover.
``islip``
    :class:`fusionfabric.rtl.switch.islip.ISLIPAllocator`: a matching (at most one grant
    per output and per input), consistent ``o_grant``/``o_match``, and bounded waiting.
``credits``
    Chiplet credit loop (:class:`~fusionfabric.rtl.chiplet.DataLinkTx` credit counters and
    the peer's :class:`~fusionfabric.rtl.chiplet.TransactionRx` consumption count): flits in
    flight + held + credits owed + credits free = the advertised buffer, and no overflow.
``pcs-lock``
    :class:`fusionfabric.rtl.pcs.lock.BlockLock` against a reference of IEEE 802.3
    Figure 49-12 written in the harness.
``reduce``
    :class:`fusionfabric.rtl.reduce.unit.ReductionUnit`: each chunk's result emitted once,
    and only after every member's first contribution (bounded, 22 steps).

See docs/formal.md and ``fusionfabric formal BLOCK [--planted BUG]``.
"""

from .flow import FormalError, FormalResult, HARNESSES, get_harness, run

__all__ = ["FormalError", "FormalResult", "HARNESSES", "get_harness", "run"]
