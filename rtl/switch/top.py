"""The ``switch`` block: one factory over the switch designs, the counter layouts and the
registry entry. Each microarchitecture is its own component (docs/switch.md):

========================  ==========================================  =====================
``mode``, ``pipeline``    component                                   zero-load latency
========================  ==========================================  =====================
``"voq"``, False          :class:`~.voq_switch.VoqSwitch`             2 cycles
``"fifo"``, False         :class:`~.fifo_switch.FifoSwitch`           2 cycles
``"voq"``, True           :class:`~.pipelined.PipelinedSwitch`        12 cycles
``"crosspoint"``, False   :class:`~.crosspoint_switch.CrosspointSwitch`  10 cycles
========================  ==========================================  =====================
"""

from __future__ import annotations

from fusionfabric.rtl.blocks import Block, Param

from .common import (RESULT_FIFO_DEPTH, STATS, UNIT_STATS, SwitchBase, stats_layout,
                     unit_stats_layout)
from .crosspoint_switch import CrosspointSwitch
from .fifo_switch import FifoSwitch
from .pipelined import PipelinedSwitch
from .voq_switch import VoqSwitch

__all__ = ["Switch", "SwitchBase", "VoqSwitch", "FifoSwitch", "PipelinedSwitch",
           "CrosspointSwitch", "STATS", "UNIT_STATS", "RESULT_FIFO_DEPTH", "stats_layout",
           "unit_stats_layout", "BLOCKS"]

#: The queueing disciplines ``Switch`` accepts as ``mode``.
MODES = ("voq", "fifo", "crosspoint")


def Switch(n_ports: int = 4, data_width: int = 64, depth: int = 16,
           iterations: int | None = None, mode: str = "voq", out_depth: int = 4,
           n_groups: int = 16, reduce: bool = False, n_chunks: int = 16,
           pipeline: bool = False, reduce_add_stages: int = 4,
           reduce_pipeline: bool = False) -> SwitchBase:
    """Build the switch design that ``mode`` and ``pipeline`` name.

    Parameters
    ----------
    mode : str
        ``"voq"`` (:class:`VoqSwitch`, or :class:`PipelinedSwitch` with ``pipeline``),
        ``"fifo"`` (:class:`FifoSwitch`) or ``"crosspoint"`` (:class:`CrosspointSwitch`).
    pipeline : bool
        The pipelined VOQ switch; needs ``mode="voq"``.
    iterations : int or None
        iSLIP rounds (None or 0: the design's default); the crosspoint switch has none,
        so only None or 0 there.
    n_ports, data_width, depth, out_depth, n_groups, reduce, n_chunks
        Passed to the design, which checks them (:class:`SwitchBase`); so are
        ``reduce_add_stages`` and ``reduce_pipeline``, the reduction units' options.

    Returns
    -------
    SwitchBase
        The component; ``mode``, ``pipeline`` and ``iterations`` are readable on it.

    Raises
    ------
    ValueError
        Naming the bad value: an unknown ``mode``, ``pipeline`` not a bool, ``pipeline``
        with another mode than ``"voq"``, ``iterations`` with ``"crosspoint"``, or any
        parameter the design rejects.
    """
    if pipeline not in (False, True):
        raise ValueError(f"pipeline={pipeline!r} must be True or False")
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not 'voq', 'fifo' or 'crosspoint'")
    if pipeline and mode != "voq":
        raise ValueError(f"pipeline=True needs mode='voq' (got mode={mode!r})")
    common = dict(n_ports=n_ports, data_width=data_width, depth=depth,
                  out_depth=out_depth, n_groups=n_groups, reduce=reduce, n_chunks=n_chunks,
                  reduce_add_stages=reduce_add_stages, reduce_pipeline=reduce_pipeline)
    if mode == "crosspoint":
        if iterations not in (None, 0):
            raise ValueError(f"iterations={iterations!r}: mode='crosspoint' has no "
                             f"iSLIP (0 or None)")
        return CrosspointSwitch(**common)
    if pipeline:
        return PipelinedSwitch(iterations=iterations, **common)
    if mode == "fifo":
        return FifoSwitch(iterations=iterations, **common)
    return VoqSwitch(iterations=iterations, **common)


def _build(n_ports, data_width, depth, iterations, mode, out_depth, n_groups, reduce,
           n_chunks, pipeline=False, reduce_add_stages=4, reduce_pipeline=False):
    return Switch(n_ports=n_ports, data_width=data_width, depth=depth,
                  iterations=iterations or None, mode=mode, out_depth=out_depth,
                  n_groups=n_groups, reduce=reduce, n_chunks=n_chunks, pipeline=pipeline,
                  reduce_add_stages=reduce_add_stages, reduce_pipeline=reduce_pipeline)


#: Lint sets beyond the defaults (sim/lint.py): the two registered variants at 8 ports, and
#: the crosspoint one with reduction units and one-slot buffers.
LINT_PARAMS = {
    "switch": [{"n_ports": 8, "pipeline": True, "depth": 64, "out_depth": 16},
               {"n_ports": 8, "mode": "crosspoint", "out_depth": 8},
               {"n_ports": 3, "mode": "crosspoint", "depth": 1, "reduce": True}],
}

BLOCKS = [
    Block("switch", _build, doc="VOQ + iSLIP crossbar with credits and multicast "
          "(docs/switch.md)", params=[
              Param("n_ports", int, 4, "ports (2..256; tested 2, 3, 4, 8; lint to 72)"),
              Param("data_width", int, 64, "data bits per flit"),
              Param("depth", int, 16, "flits per VOQ or crosspoint buffer (power of two)"),
              Param("iterations", int, 0, "iSLIP rounds, 1..ceil(log2 n); 0 = min(3, max)"),
              Param("mode", str, "voq", "input queueing (crosspoint: a buffered "
                    "crossbar, docs/switch.md)", choices=("voq", "fifo", "crosspoint")),
              Param("out_depth", int, 4, "output buffer slots = credits per output"),
              Param("n_groups", int, 16, "group-table entries (1..256)"),
              Param("reduce", bool, False, "per-port reduction units (rtl/reduce)"),
              Param("n_chunks", int, 16, "open-chunk slots per reduction unit (1..64)"),
              Param("pipeline", bool, False, "registered iSLIP, block-RAM VOQs, pipelined "
                    "crossbar (docs/switch.md; full rate needs out_depth >= 10)"),
              Param("reduce_add_stages", int, 4, "the reduction units' fp32 adder stages, "
                    "4..7 (docs/reduction.md)"),
              Param("reduce_pipeline", bool, False, "the reduction units' pipeline option "
                    "(docs/reduction.md; 103.8 MHz on ECP5 with reduce_add_stages=7)"),
          ]),
]
