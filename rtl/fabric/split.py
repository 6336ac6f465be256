"""The fabric's Verilog split by endpoint path: one module per distinct path, one for the
switch, one for its reduction units, and a thin top that instantiates them (docs/fabric.md,
"Split Verilog").

:class:`~.fabric.Fabric` converts as one design: every endpoint's chiplets, PCS, lanes and
bridges are elaborated and written out again for each endpoint, so the conversion's memory
and time grow with the endpoint count (a 72-endpoint list does not convert in 23 GB).
Endpoints differ only in their lane count, their kind (a ``cpu`` has a memory target) and
a few constants: the node id, the index of their first lane in ``i_fault``/``o_flips`` and
the seeds of their lane error generators. :class:`EndpointLink` takes those constants as
input ports, so one module serves every endpoint of the same lanes and kind; the top,
:class:`SplitTop`, ties them to constants. The switch's reduction units, all of the same
parameters, are likewise one module that the switch instantiates once per port
(``SwitchBase.unit_module``). The split design has the fabric's ports and, after the first
reset, its behaviour cycle for cycle.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth import ClockSignal, Const, Instance, Module, ResetSignal, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, flipped

from fusionfabric.rtl.chiplet.common import STATUS, port_layout
from fusionfabric.rtl.export import instance_ports, timescale_line, to_verilog
from fusionfabric.rtl.switch.common import split_switch_verilog
from fusionfabric.formats.chiplet import SLOT_BITS
from fusionfabric.formats.memory import MEM_STATUS
from fusionfabric.formats.switch import switch_flit

from .fabric import UP, Fabric, fault_layout, fec_status_layout, lane_index, \
    link_status_layout
from .fault import LaneFault, seed_values

__all__ = ["EndpointLink", "SplitTop", "split_verilog", "split_design_verilog",
           "link_variants"]


def link_variants(fab: Fabric) -> dict[tuple[int, bool], list[int]]:
    """The distinct endpoint paths of ``fab``: ``(lanes, cpu)`` → its endpoints, in order
    of first appearance."""
    out: dict[tuple[int, bool], list[int]] = {}
    for e in range(fab.n_endpoints):
        out.setdefault((fab.lanes[e], e in fab.mem_targets), []).append(e)
    return out


def _module_name(top: str, lanes: int, cpu: bool) -> str:
    return f"{top}_link_{'cpu' if cpu else 'acc'}{lanes}"


class EndpointLink(wiring.Component):
    """One endpoint's path of ``fab`` (the endpoints of ``endpoint``'s lanes and kind),
    with the per-endpoint constants as inputs.

    Members
    -------
    i_req, i_rsp, o_req, o_rsp : the endpoint's accelerator ports (``Fabric.i_req[e]``...)
    o_flit, i_flit : to and from the switch's port ``e``
    i_fault, i_fault_valid : ``Fabric.i_fault``'s payload and valid
    i_node_id : In(8), the endpoint's number ``e``
    i_lane_base : In(16), ``lane_index(e, UP, 0)``: the ``i_fault.lane`` of its first lane
        (16 bits: a lane index past 255 never matches the 8-bit field, as in ``Fabric``)
    i_seed_x, i_seed_y : In(32).array(2 * lanes), each lane's generator reset values
        (:func:`~.fault.seed_values` of ``fault_seed * 1000003 + lane index``)
    o_ep_status, o_sw_status, o_link, o_bridge_drops, o_fec, o_mem_status :
        the endpoint's entries of the fabric's outputs
    o_flips : Out(32).array(2 * lanes), its lanes' entries of ``Fabric.o_flips``
        (``d * lanes + k``, the order of :func:`~.fabric.lane_index`)
    """

    def __init__(self, fab: Fabric, endpoint: int):
        self.fab, self.endpoint = fab, endpoint
        self.lanes = fab.lanes[endpoint]
        self.cpu = endpoint in fab.mem_targets
        beat = stream.Signature(port_layout())
        flit = stream.Signature(switch_flit(SLOT_BITS).layout())
        sig = {
            "i_req": In(beat), "i_rsp": In(beat), "o_req": Out(beat), "o_rsp": Out(beat),
            "o_flit": Out(flit), "i_flit": In(flit),
            "i_fault": In(fault_layout()), "i_fault_valid": In(1),
            "i_node_id": In(8), "i_lane_base": In(16),
            "i_seed_x": In(32).array(2 * self.lanes), "i_seed_y": In(32).array(2 * self.lanes),
            "o_ep_status": Out(STATUS.layout()), "o_sw_status": Out(STATUS.layout()),
            "o_link": Out(link_status_layout()),
            "o_flips": Out(32).array(2 * self.lanes),
            "o_bridge_drops": Out(16),
        }
        if fab.lane_profile == "rs544":
            sig["o_fec"] = Out(fec_status_layout())
        if self.cpu:
            sig["o_mem_status"] = Out(MEM_STATUS.layout())
        if fab.dest_credits:
            sig["o_dest_ready"] = Out(fab.n_endpoints)
        super().__init__(sig)

    def elaborate(self, platform):
        from .memory import MemTarget
        fab, n = self.fab, self.lanes
        m = Module()

        def lane(d, k):
            j = d * n + k
            lf = LaneFault(latency=fab.latency, width=fab.lane_bits, seed_ports=True)
            m.d.comb += [lf.i_seed_x.eq(self.i_seed_x[j]), lf.i_seed_y.eq(self.i_seed_y[j])]
            return lf, self.i_lane_base + j, self.o_flips[j]

        io = SimpleNamespace(
            fault=SimpleNamespace(valid=self.i_fault_valid, payload=self.i_fault),
            node_id=self.i_node_id, lane=lane, i_req=flipped(self.i_req),
            i_rsp=flipped(self.i_rsp), o_req=flipped(self.o_req), o_rsp=flipped(self.o_rsp),
            rsp_ready=self.i_rsp.ready, to_switch=flipped(self.o_flit),
            from_switch=flipped(self.i_flit), ep_status=self.o_ep_status,
            sw_status=self.o_sw_status, link=self.o_link,
            fec=self.o_fec if fab.lane_profile == "rs544" else None,
            mem=MemTarget(fab.mem_bytes) if self.cpu else None,
            mem_status=self.o_mem_status if self.cpu else None,
            stats=[], bridge_drops=self.o_bridge_drops,
            dest_ready=self.o_dest_ready if fab.dest_credits else None)
        fab._endpoint(m, self.endpoint, io, tag="")
        return m


def _port_name(path) -> str:
    return "__".join(str(p) for p in path)


class SplitTop(wiring.Component):
    """The top of the split design: ``fab``'s ports, the switch module ``{top}_switch``
    and one :class:`EndpointLink` module instance per endpoint, all by ``Instance``."""

    def __init__(self, fab: Fabric, top: str):
        self.fab, self.top = fab, top
        super().__init__(dict(fab.signature.members))

    def elaborate(self, platform):
        fab, top = self.fab, self.top
        m = Module()
        mine = {path: value for path, _, value in self.signature.flatten(self)}
        sw_ports = {path: value for path, _, value in fab.switch.signature.flatten(fab.switch)}
        wires = {}

        def sw_value(path, member):
            # the switch's credit outputs are unread in the fabric as well
            if path[0] in ("i_port", "o_port", "o_credit", "o_unit_credit"):
                if path not in wires:
                    wires[path] = Signal(Value.cast(sw_ports[path]).shape(),
                                         name="sw_" + _port_name(path))
                return wires[path]
            return mine[path]

        clk = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        m.submodules.switch = Instance(f"{top}_switch", **clk,
                                       **instance_ports(fab.switch, sw_value))
        m.d.comb += self.i_fault.ready.eq(1)
        cpus = fab.cpu_endpoints
        for (lanes, cpu), members in link_variants(fab).items():
            link = EndpointLink(fab, members[0])
            link._MustUse__silence = True      # its signature names the ports
            for e in members:
                base = lane_index(e, UP, 0, lanes=fab.lanes)
                seeds = [seed_values(fab.fault_seed * 1000003 + base + j)
                         for j in range(2 * lanes)]

                def value_of(path, member, e=e, base=base, seeds=seeds):
                    head, rest = path[0], path[1:]
                    if head in ("i_req", "i_rsp", "o_req", "o_rsp", "o_ep_status",
                                "o_sw_status", "o_link", "o_bridge_drops", "o_fec",
                                "o_dest_ready"):
                        return mine[(head, e, *rest)]
                    if head == "o_mem_status":
                        return mine[(head, cpus.index(e), *rest)]
                    if head == "o_flit":
                        return sw_value(("i_port", e, *rest), member)
                    if head == "i_flit":
                        return sw_value(("o_port", e, *rest), member)
                    if head == "i_fault":
                        return mine[("i_fault", "payload")]
                    if head == "i_fault_valid":
                        return mine[("i_fault", "valid")]
                    if head == "o_flips":
                        return mine[("o_flips", base + rest[0])]
                    if head == "i_node_id":
                        return Const(e, 8)
                    if head == "i_lane_base":
                        return Const(base, 16)
                    if head in ("i_seed_x", "i_seed_y"):
                        return Const(seeds[rest[0]][head == "i_seed_y"], 32)
                    raise AssertionError(f"unmapped port {path!r}")   # pragma: no cover

                m.submodules[f"link{e}"] = Instance(
                    _module_name(top, lanes, cpu), **clk, **instance_ports(link, value_of))
        return m


def split_verilog(fab: Fabric, top: str = "fabric", *, timescale: str | None = None,
                  progress=None, with_switch: bool = True) -> str:
    """Verilog-2005 of ``fab`` as the split design: the reduction unit module
    ``{top}_reduce_unit`` (one for all the switch's units), the switch module
    ``{top}_switch`` that instantiates it once per port (:func:`split_switch_verilog`),
    one module ``{top}_link_acc{lanes}``/``{top}_link_cpu{lanes}`` per distinct endpoint
    path, and the top ``top`` with ``fab``'s ports. ``progress(name)`` is called before
    each module's conversion. ``with_switch=False`` leaves the switch module out (the
    text is then incomplete: it measures the endpoint side alone, bench/split_verilog.py)."""
    parts = []
    note = progress or (lambda name: None)
    # fab and its memory targets only describe the design here: never elaborated
    for obj in (fab, *fab.mem_targets.values(), *(t.mem for t in fab.mem_targets.values())):
        obj._MustUse__silence = True
    if with_switch:
        parts.append(split_switch_verilog(fab.switch, f"{top}_switch", progress=note,
                                          unit_name=f"{top}_reduce_unit"))
    else:
        fab.switch._MustUse__silence = True
    for (lanes, cpu), members in link_variants(fab).items():
        name = _module_name(top, lanes, cpu)
        note(name)
        parts.append(to_verilog(EndpointLink(fab, members[0]), name))
    note(top)
    parts.append(to_verilog(SplitTop(fab, top), top))
    return timescale_line(timescale) + "".join(parts)


def split_design_verilog(component, name: str, *, timescale: str | None = None,
                         progress=None) -> str:
    """The split Verilog of ``component``: :func:`split_verilog` for a
    :class:`~.fabric.Fabric`, :func:`split_switch_verilog` for a switch (which must have
    ``reduce=True``), with the `` `timescale`` line of ``timescale``. Raises
    ``ValueError`` for anything else."""
    from fusionfabric.rtl.switch.common import SwitchBase
    if isinstance(component, Fabric):
        return split_verilog(component, name, timescale=timescale, progress=progress)
    if isinstance(component, SwitchBase):
        return timescale_line(timescale) + split_switch_verilog(component, name,
                                                                progress=progress)
    raise ValueError(f"{type(component).__name__} has no split form (a Fabric or a switch "
                     f"with reduce=True has)")
