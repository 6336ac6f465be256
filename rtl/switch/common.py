"""What every switch design shares: the parameters, the ports and the counter layouts.

Each microarchitecture is its own component (:class:`~.voq_switch.VoqSwitch`,
:class:`~.fifo_switch.FifoSwitch`, :class:`~.pipelined.PipelinedSwitch`,
:class:`~.crosspoint_switch.CrosspointSwitch`), built on :class:`SwitchBase`, which checks
the parameters they have in common and declares the ports they all have. The cycle-level
contract is docs/switch.md.
"""

from __future__ import annotations

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.switch import GROUP_BITS, switch_flit

from .group_table import config_layout

__all__ = ["SwitchBase", "STATS", "UNIT_STATS", "RESULT_FIFO_DEPTH", "stats_layout",
           "unit_stats_layout", "split_switch_verilog"]

#: Per-port counters, LSB first, 32 bits each (``o_stats[p]``).
STATS = ("flits_in", "flits_out", "in_stalls", "out_stalls", "drop_dest", "drop_group",
         "drop_kind")


def stats_layout() -> data.StructLayout:
    return data.StructLayout({name: 32 for name in STATS})


#: Results buffered between a reduction unit and its crossbar row (``reduce=True``).
RESULT_FIFO_DEPTH = 4

#: Per-unit counters with ``reduce=True`` (``o_unit_stats[u]``): the unit's own counters
#: plus ``result_drops`` (results whose target set is empty, e.g. root >= n_ports).
UNIT_STATS = ("contributions", "results", "duplicate", "nonmember", "invalid",
              "full_cycles")


def unit_stats_layout() -> data.StructLayout:
    return data.StructLayout({name: 32 for name in UNIT_STATS + ("result_drops",)})


class SwitchBase(wiring.Component):
    """The parameters and ports of every switch design; each design adds ``elaborate``.

    A subclass sets the class attributes ``mode`` (``"voq"``, ``"fifo"`` or
    ``"crosspoint"``) and ``pipeline``, checks its own parameters (``iterations``, the
    queue depth it accepts), sets ``self.iterations`` and then calls this constructor.

    Parameters
    ----------
    n_ports : int
        Ports, 2 … 256.
    data_width : int
        Bits of ``data`` per flit (``fusionfabric.formats.switch.switch_flit``).
    depth : int
        Flits per queue (a power of two); what a queue is depends on the design.
    out_depth : int
        Output buffer slots = credits per output.
    n_groups : int
        Group-table entries (multicast and reduction groups), 1 … 256.
    reduce : bool
        Per-port reduction units (``fusionfabric.rtl.reduce.unit``, docs/switch.md); needs
        ``data_width`` a multiple of 32 and ``n_ports`` <= 128.
    n_chunks : int
        Open-chunk slots per reduction unit, 1 … 64.
    reduce_add_stages, reduce_pipeline : int, bool
        The reduction units' ``add_stages`` (4 … 7) and ``pipeline``
        (:class:`~fusionfabric.rtl.reduce.unit.ReductionUnit`, docs/reduction.md, "Area and
        speed options"): more result latency, same results and throughput; other values
        than the defaults (4, False) need ``reduce=True``. The cycle-level model has the
        default unit only.

    Members
    -------
    i_port : In(stream.Signature(switch_flit(data_width).layout())).array(n_ports)
        Ingress; ``src`` is overwritten with the port index.
    o_port : Out(stream.Signature(switch_flit(data_width).layout())).array(n_ports)
        Egress.
    i_config : In(stream.Signature(config_layout(n_ports)))
        Group-table writes, always ready.
    o_credit : Out(range(out_depth + 1)).array(n_ports)
        Credits held for each output (``out_depth`` when the switch is idle).
    o_stats : Out(stats_layout()).array(n_ports)
        Counters per port, see :data:`STATS`.
    o_config_drops : Out(32)
        Configuration writes to a group >= ``n_groups``.
    o_unit_credit : Out(range(out_depth + 1)).array(n_ports)
        With ``reduce=True``: credits held for each unit's contribution input.
    o_unit_stats : Out(unit_stats_layout()).array(n_ports)
        With ``reduce=True``: counters per unit, see :data:`UNIT_STATS`.

    Attributes
    ----------
    unit_module : str or None
        None (the default): the reduction units are elaborated inside the switch. A
        module name: each unit becomes an ``Instance`` of that module
        (:class:`~fusionfabric.rtl.export.ModuleInstance`), whose Verilog is the unit's
        own conversion under that name; the split fabric (``rtl/fabric/split.py``) sets
        it for the conversion of its switch module.

    Timing
    ------
    Set by each design (its own docstring and docs/switch.md). All designs share the
    routing and drop rules, one flit per cycle per input and per output, and reset:
    queues empty, credits full, pointers, group table and counters cleared.
    """

    mode: str
    pipeline: bool = False
    unit_module: str | None = None

    def __init__(self, n_ports: int = 4, data_width: int = 64, depth: int = 16,
                 out_depth: int = 4, n_groups: int = 16, reduce: bool = False,
                 n_chunks: int = 16, reduce_add_stages: int = 4,
                 reduce_pipeline: bool = False):
        if not isinstance(n_ports, int) or not 2 <= n_ports <= 256:
            raise ValueError(f"n_ports={n_ports!r} must be an integer in 2..256")
        if not isinstance(data_width, int) or data_width < 1:
            raise ValueError(f"data_width={data_width!r} must be a positive integer")
        if not isinstance(depth, int) or depth < 1 or depth & (depth - 1):
            raise ValueError(f"depth={depth!r} must be a power of two >= 1")
        if not isinstance(out_depth, int) or out_depth < 1:
            raise ValueError(f"out_depth={out_depth!r} must be a positive integer")
        if not isinstance(n_groups, int) or not 1 <= n_groups <= 1 << GROUP_BITS:
            raise ValueError(f"n_groups={n_groups!r} must be in 1..{1 << GROUP_BITS}")
        if not isinstance(n_chunks, int) or not 1 <= n_chunks <= 64:
            raise ValueError(f"n_chunks={n_chunks!r} must be an integer in 1..64")
        if reduce not in (False, True):
            raise ValueError(f"reduce={reduce!r} must be True or False")
        if reduce and (data_width % 32 or n_ports > 128):
            raise ValueError(f"reduce=True needs data_width a multiple of 32 (got "
                             f"{data_width}) and n_ports <= 128 (got {n_ports})")
        self.n_ports = n_ports
        self.data_width = data_width
        self.depth = depth
        self.out_depth = out_depth
        self.n_groups = n_groups
        self.reduce = bool(reduce)
        self.n_chunks = n_chunks
        if not isinstance(reduce_pipeline, bool):
            raise ValueError(f"reduce_pipeline={reduce_pipeline!r} must be True or False")
        from fusionfabric.rtl.reduce.fpadd import Fp32Add
        Fp32Add.check_stages(reduce_add_stages, name="reduce_add_stages")
        if not reduce and (reduce_pipeline or reduce_add_stages != Fp32Add.LATENCY):
            raise ValueError(f"reduce_add_stages={reduce_add_stages!r} and reduce_pipeline="
                             f"{reduce_pipeline!r} set the reduction units: they need "
                             f"reduce=True")
        self.reduce_add_stages = reduce_add_stages
        self.reduce_pipeline = reduce_pipeline
        self.flit = switch_flit(data_width)
        layout = self.flit.layout()
        members = {
            "i_port": In(stream.Signature(layout)).array(n_ports),
            "o_port": Out(stream.Signature(layout)).array(n_ports),
            "i_config": In(stream.Signature(config_layout(n_ports))),
            "o_credit": Out(range(out_depth + 1)).array(n_ports),
            "o_stats": Out(stats_layout()).array(n_ports),
            "o_config_drops": Out(32),
        }
        if reduce:
            members["o_unit_credit"] = Out(range(out_depth + 1)).array(n_ports)
            members["o_unit_stats"] = Out(unit_stats_layout()).array(n_ports)
        super().__init__(members)

    def reduction_unit(self):
        """A new reduction unit of this switch's parameters (one per port with
        ``reduce=True``)."""
        from fusionfabric.rtl.reduce.unit import ReductionUnit
        return ReductionUnit(n_ports=self.n_ports, data_width=self.data_width,
                             n_chunks=self.n_chunks, n_groups=self.n_groups,
                             add_stages=self.reduce_add_stages, pipeline=self.reduce_pipeline)

    @property
    def n_rows(self) -> int:
        """Crossbar size: rows 0 … n−1 are the ports, rows n … 2n−1 (``reduce=True``) the
        reduction units' results; columns likewise the ports and the units' inputs."""
        return 2 * self.n_ports if self.reduce else self.n_ports


def split_switch_verilog(switch: SwitchBase, name: str = "switch", progress=None,
                         unit_name: str | None = None) -> str:
    """Verilog-2005 of a switch with ``reduce=True`` as two modules: ``unit_name`` (default
    ``{name}_reduce_unit``: one reduction unit of the switch's parameters, written once)
    and the switch ``name``, whose units are instances of it
    (:attr:`SwitchBase.unit_module`). Same ports and behaviour as the switch's flat
    conversion. ``progress(module)`` is called before each module's conversion. Raises
    ``ValueError`` for a switch without reduction units."""
    from fusionfabric.rtl.export import to_verilog
    if not switch.reduce:
        raise ValueError("a switch without reduction units (reduce=False) has no split form")
    note = progress or (lambda module: None)
    unit_name = unit_name or f"{name}_reduce_unit"
    note(unit_name)
    parts = [to_verilog(switch.reduction_unit(), unit_name)]
    note(name)
    switch.unit_module = unit_name
    try:
        parts.append(to_verilog(switch, name))
    finally:
        switch.unit_module = None
    return "".join(parts)
