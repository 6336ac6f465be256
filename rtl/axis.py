"""AXI4-Stream wrappers: the switch's ports and the chiplet's accelerator port as
AXI4-Stream interfaces (blocks ``switch-axis`` and ``chiplet-axis``, docs/axis.md).

Every stream inside the RTL is an ``amaranth.lib.stream`` (payload, valid, ready). These
components put the same design behind ports named the AXI4-Stream way (ARM IHI 0051):
per interface ``<prefix>_tdata``, ``_tkeep``, ``_tlast``, ``_tvalid``, ``_tready``,
``_tdest``, ``_tid``, ``_tuser`` at the top level of the generated Verilog, so a bus
finder such as cocotbext-axi's ``AxiStreamBus.from_prefix(dut, "s_axis_0")`` binds them.
Byte k of ``tdata`` is bits 8k..8k+7 (the project's little-endian byte order). The
mapping of each signal onto the wrapped design's beat is docs/axis.md.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from fusionfabric.formats.chiplet import PORT_BEAT, SLOT_BITS, TL_HEADER
from fusionfabric.formats.switch import CHUNK_BITS, DEST_BITS, SRC_BITS
from fusionfabric.rtl.blocks import Block, Param
from fusionfabric.rtl.chiplet import CHIPLET_PARAMS, Chiplet
from fusionfabric.rtl.chiplet.common import data_slots
from fusionfabric.rtl.switch.top import BLOCKS as _SWITCH_BLOCKS
from fusionfabric.rtl.switch.top import Switch

__all__ = ["SwitchAxis", "ChipletAxis", "SWITCH_TUSER_BITS", "CHIPLET_TUSER_FIELDS",
           "CHIPLET_TUSER_BITS", "BLOCKS"]

#: ``tuser`` of a switch port: ``kind`` (bits 0-1) then ``chunk`` (bits 2-17).
SWITCH_TUSER_BITS = 2 + CHUNK_BITS

#: ``tuser`` of the chiplet's accelerator port: the TL header fields other than ``dest``
#: (in ``tdest``) and ``src`` (in ``tid``), in header order, LSB first.
CHIPLET_TUSER_FIELDS = tuple(name for name, _ in TL_HEADER.fields if name not in ("dest", "src"))
CHIPLET_TUSER_BITS = sum(TL_HEADER.widths[n] for n in CHIPLET_TUSER_FIELDS)
assert CHIPLET_TUSER_FIELDS[:2] == ("opcode", "length")   # tuser[0:4], tuser[4:6]


def _axis_members(prefix: str, flow, data_bits: int, *, keep: bool, last: bool,
                  dest: int, ident: int, user: int) -> dict:
    """Flat members ``<prefix>_t*`` of one AXI4-Stream interface.

    ``flow`` is ``In`` for a slave (sink) interface, ``Out`` for a master (source); a width
    of 0 (or False) leaves the signal out.
    """
    back = Out if flow is In else In
    members = {f"{prefix}_tdata": flow(data_bits)}
    if keep:
        members[f"{prefix}_tkeep"] = flow(data_bits // 8)
    if last:
        members[f"{prefix}_tlast"] = flow(1)
    members[f"{prefix}_tvalid"] = flow(1)
    members[f"{prefix}_tready"] = back(1)
    if dest:
        members[f"{prefix}_tdest"] = flow(dest)
    if ident:
        members[f"{prefix}_tid"] = flow(ident)
    if user:
        members[f"{prefix}_tuser"] = flow(user)
    return members


def _axis(component, prefix: str) -> SimpleNamespace:
    """The ``<prefix>_t*`` members of ``component`` as ``.tdata``, ``.tvalid``, ..."""
    out = {}
    for sig in ("tdata", "tkeep", "tlast", "tvalid", "tready", "tdest", "tid", "tuser"):
        name = f"{prefix}_{sig}"
        if name in component.signature.members:
            out[sig] = getattr(component, name)
    return SimpleNamespace(**out)


def _check_bool(name, value):
    if value not in (False, True):
        raise ValueError(f"{name}={value!r} must be True or False")


class SwitchAxis(wiring.Component):
    """The switch (``fusionfabric.rtl.switch.top.Switch``) with AXI4-Stream ports.

    Parameters
    ----------
    keep : bool
        Carry ``tkeep`` through the switch: the inner switch is built with
        ``data_width + data_width // 8`` data bits, the byte enables riding above the data,
        so a frame of any byte length arrives with its own ``tkeep``. False: the switch
        carries ``data_width`` bits, ``s_axis_<p>`` has no ``tkeep`` and ``m_axis_<p>_tkeep``
        is all ones. ``reduce=True`` needs ``keep=False`` (the reduction units read the
        whole flit as numbers).
    n_ports, data_width, depth, iterations, mode, out_depth, n_groups, reduce, n_chunks,
    pipeline, reduce_add_stages, reduce_pipeline
        Those of the ``switch`` block (docs/switch.md); ``data_width`` must also be a
        multiple of 8 (a whole number of ``tdata`` bytes).

    Members
    -------
    s_axis_<p>_{tdata, tkeep, tlast, tvalid, tready, tdest, tuser}
        Ingress of port p (an AXI4-Stream slave); ``tkeep`` only with ``keep``.
    m_axis_<p>_{tdata, tkeep, tlast, tvalid, tready, tdest, tid, tuser}
        Egress of port p (an AXI4-Stream master).
    i_config, o_credit, o_stats, o_config_drops, o_unit_credit, o_unit_stats
        The switch's own, unchanged (docs/switch.md).
    switch
        The wrapped switch component.

    Timing
    ------
    Combinational between each AXI4-Stream interface and the switch port it maps to: the
    wrapper adds no cycle to the switch's latency. The only state is one bit per ingress
    port (inside a frame), cleared by reset, from which the flit's ``first`` is made.
    """

    def __init__(self, n_ports: int = 4, data_width: int = 64, depth: int = 16,
                 iterations: int | None = None, mode: str = "voq", out_depth: int = 4,
                 n_groups: int = 16, reduce: bool = False, n_chunks: int = 16,
                 pipeline: bool = False, keep: bool = True, reduce_add_stages: int = 4,
                 reduce_pipeline: bool = False):
        if not isinstance(data_width, int) or data_width < 8 or data_width % 8:
            raise ValueError(f"data_width={data_width!r} must be a positive multiple of 8 "
                             f"(whole tdata bytes)")
        _check_bool("keep", keep)
        if keep and reduce:
            raise ValueError(f"keep={keep!r} with reduce={reduce!r}: the reduction units "
                             f"need keep=False")
        self.keep = bool(keep)
        self.data_width = data_width
        inner = data_width + (data_width // 8 if keep else 0)
        self.switch = Switch(n_ports=n_ports, data_width=inner, depth=depth,
                             iterations=iterations, mode=mode, out_depth=out_depth,
                             n_groups=n_groups, reduce=reduce, n_chunks=n_chunks,
                             pipeline=pipeline, reduce_add_stages=reduce_add_stages,
                             reduce_pipeline=reduce_pipeline)
        sw = self.switch
        self.n_ports = sw.n_ports
        members = {}
        for p in range(sw.n_ports):
            members.update(_axis_members(f"s_axis_{p}", In, data_width, keep=keep, last=True,
                                         dest=DEST_BITS, ident=0, user=SWITCH_TUSER_BITS))
        for p in range(sw.n_ports):
            members.update(_axis_members(f"m_axis_{p}", Out, data_width, keep=True,
                                         last=True, dest=DEST_BITS, ident=SRC_BITS,
                                         user=SWITCH_TUSER_BITS))
        for name, member in sw.signature.members.items():
            if name not in ("i_port", "o_port"):
                members[name] = member
        super().__init__(members)

    def s_axis(self, p: int) -> SimpleNamespace:
        return _axis(self, f"s_axis_{p}")

    def m_axis(self, p: int) -> SimpleNamespace:
        return _axis(self, f"m_axis_{p}")

    def elaborate(self, platform):
        m = Module()
        m.submodules.switch = sw = self.switch
        dw = self.data_width
        # the switch's other members, unchanged
        own = {tuple(path): value for path, _, value in self.signature.flatten(self)}
        for path, member, value in sw.signature.flatten(sw):
            if path[0] in ("i_port", "o_port"):
                continue
            outer = own[tuple(path)]
            m.d.comb += value.eq(outer) if member.flow == In else outer.eq(value)
        for p in range(self.n_ports):
            s, port = self.s_axis(p), sw.i_port[p]
            inside = Signal(name=f"inside_{p}")   # a beat without tlast was taken
            with m.If(s.tvalid & s.tready):
                m.d.sync += inside.eq(~s.tlast)
            data = Cat(s.tdata, s.tkeep) if self.keep else s.tdata
            m.d.comb += [
                port.valid.eq(s.tvalid),
                s.tready.eq(port.ready),
                port.payload.data.eq(data),
                port.payload.first.eq(~inside),
                port.payload.last.eq(s.tlast),
                port.payload.kind.eq(s.tuser[:2]),
                port.payload.chunk.eq(s.tuser[2:]),
                port.payload.dest.eq(s.tdest),
                port.payload.src.eq(0),
            ]
            o, port = self.m_axis(p), sw.o_port[p]
            keep = port.payload.data[dw:] if self.keep else Const((1 << dw // 8) - 1, dw // 8)
            m.d.comb += [
                o.tvalid.eq(port.valid),
                port.ready.eq(o.tready),
                o.tdata.eq(port.payload.data[:dw]),
                o.tkeep.eq(keep),
                o.tlast.eq(port.payload.last),
                o.tdest.eq(port.payload.dest),
                o.tid.eq(port.payload.src),
                o.tuser.eq(Cat(port.payload.kind, port.payload.chunk)),
            ]
        return m


class ChipletAxis(wiring.Component):
    """The chiplet (``fusionfabric.rtl.chiplet.Chiplet``) with its accelerator port as
    four AXI4-Stream interfaces.

    Parameters
    ----------
    tl_per_dl, replay_depth, rx_credits, replay_timeout, close_timeout, stamp_src,
    replay_limit, link_timeout, retrain_holdoff, cpl_timeout
        Those of the ``chiplet`` block (docs/protocol.md), checked by the chiplet.

    Members
    -------
    s_axis_req_{tdata, tlast, tvalid, tready, tdest, tid, tuser}
        Requests from the accelerator (the chiplet's ``i_req``).
    m_axis_req_{tdata, tkeep, tlast, tvalid, tready, tdest, tid, tuser}
        Requests from the peer (``o_req``).
    s_axis_rsp_{...}, m_axis_rsp_{...}
        Responses the accelerator owes (``i_rsp``) and responses to its own requests
        (``o_rsp``), the same signals.
    o_axis_req_framing, o_axis_rsp_framing : Out(16)
        Beats taken on ``s_axis_req`` / ``s_axis_rsp`` whose ``tlast`` differs from the
        message end the header gives (saturating; cleared by reset). The chiplet frames
        messages by their header, so such a beat is carried as the header says.
    o_phy, i_phy, i_link_up, i_node_id, o_status
        The chiplet's own, unchanged.
    chiplet
        The wrapped chiplet component.

    Timing
    ------
    Combinational between each AXI4-Stream interface and the chiplet stream it maps to
    (no added cycle). State: a beat counter per stream for ``tlast``, and the two framing
    counters; reset clears them.
    """

    STREAMS = (("s_axis_req", "i_req"), ("m_axis_req", "o_req"),
               ("s_axis_rsp", "i_rsp"), ("m_axis_rsp", "o_rsp"))

    def __init__(self, tl_per_dl=4, replay_depth=8, rx_credits=16, replay_timeout=0,
                 close_timeout=8, stamp_src=True, replay_limit=16, link_timeout=0,
                 retrain_holdoff=0, cpl_timeout=65536):
        self.chiplet = Chiplet(tl_per_dl=tl_per_dl, replay_depth=replay_depth,
                               rx_credits=rx_credits, replay_timeout=replay_timeout,
                               close_timeout=close_timeout, stamp_src=stamp_src,
                               replay_limit=replay_limit, link_timeout=link_timeout,
                               retrain_holdoff=retrain_holdoff, cpl_timeout=cpl_timeout)
        members = {}
        for prefix, _ in self.STREAMS:
            flow = In if prefix.startswith("s_") else Out
            members.update(_axis_members(prefix, flow, SLOT_BITS, keep=flow is Out,
                                         last=True, dest=DEST_BITS, ident=SRC_BITS,
                                         user=CHIPLET_TUSER_BITS))
        members["o_axis_req_framing"] = Out(16)
        members["o_axis_rsp_framing"] = Out(16)
        for name, member in self.chiplet.signature.members.items():
            if name not in ("i_req", "o_req", "i_rsp", "o_rsp"):
                members[name] = member
        super().__init__(members)

    def axis(self, prefix: str) -> SimpleNamespace:
        return _axis(self, prefix)

    def elaborate(self, platform):
        m = Module()
        m.submodules.chiplet = ch = self.chiplet
        connect(m, flipped(self.i_phy), ch.i_phy)
        connect(m, ch.o_phy, flipped(self.o_phy))
        m.d.comb += [ch.i_link_up.eq(self.i_link_up), ch.i_node_id.eq(self.i_node_id),
                     self.o_status.eq(ch.o_status)]
        offsets = {}
        pos = 0
        for name, width in PORT_BEAT.fields:
            offsets[name] = (pos, width)
            pos += width
        for prefix, inner in self.STREAMS:
            a, port = self.axis(prefix), getattr(ch, inner)
            beat = port.payload.as_value()
            user = Cat(*(beat[offsets[n][0]:offsets[n][0] + offsets[n][1]]
                         for n in CHIPLET_TUSER_FIELDS))
            dest = beat[offsets["dest"][0]:offsets["dest"][0] + DEST_BITS]
            src = beat[offsets["src"][0]:offsets["src"][0] + SRC_BITS]
            # the message end: max(1, data slots) beats, counted from the first
            count = Signal(5, name=f"{prefix}_beat")
            nds = Signal(5, name=f"{prefix}_nds")
            end = Signal(name=f"{prefix}_end")
            if prefix.startswith("s_"):
                m.d.comb += [
                    port.valid.eq(a.tvalid),
                    a.tready.eq(port.ready),
                    beat[:SLOT_BITS].eq(a.tdata),
                    user.eq(a.tuser),
                    dest.eq(a.tdest),
                    src.eq(a.tid),
                ]
                opcode, length = a.tuser[:4], a.tuser[4:6]
            else:
                m.d.comb += [
                    a.tvalid.eq(port.valid),
                    port.ready.eq(a.tready),
                    a.tdata.eq(beat[:SLOT_BITS]),
                    a.tkeep.eq(Const((1 << SLOT_BITS // 8) - 1, SLOT_BITS // 8)),
                    a.tuser.eq(user),
                    a.tdest.eq(dest),
                    a.tid.eq(src),
                    a.tlast.eq(end),
                ]
                opcode, length = a.tuser[:4], a.tuser[4:6]
            m.d.comb += [nds.eq(data_slots(opcode, length)),
                         end.eq(Mux(nds == 0, 1, count == nds - 1))]
            with m.If(port.valid & port.ready):
                m.d.sync += count.eq(Mux(end, 0, count + 1))
            if prefix.startswith("s_"):
                err = getattr(self, f"o_axis_{prefix[7:]}_framing")
                cnt = Signal(16, name=f"{prefix}_framing")
                m.d.comb += err.eq(cnt)
                with m.If(port.valid & port.ready & (a.tlast != end) & (cnt != 0xFFFF)):
                    m.d.sync += cnt.eq(cnt + 1)
        return m


def _switch_axis(keep, **params):
    params["iterations"] = params["iterations"] or None
    return SwitchAxis(keep=keep, **params)


BLOCKS = [
    Block("switch-axis", _switch_axis, doc="The switch with AXI4-Stream ports "
          "s_axis_<p>/m_axis_<p> (docs/axis.md)",
          params=list(_SWITCH_BLOCKS[0].params) + [
              Param("keep", bool, True, "carry tkeep through the switch (False: not carried, "
                    "m_axis tkeep all ones; needed with reduce)")]),
    Block("chiplet-axis", ChipletAxis, params=CHIPLET_PARAMS,
          doc="The chiplet with its accelerator port as AXI4-Stream "
          "s_axis_req/m_axis_req/s_axis_rsp/m_axis_rsp (docs/axis.md)"),
]
