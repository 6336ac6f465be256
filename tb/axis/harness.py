"""Test harness of the ``chiplet-axis`` block (not a product block): two
:class:`~fusionfabric.rtl.axis.ChipletAxis` back to back. The cocotb testbench is
tb/axis/test_chiplet_axis.py; pytest runs it through
``runner.run("chiplet-axis-pair", "fusionfabric.tb.axis.test_chiplet_axis", component=...)``.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out, connect

from fusionfabric.rtl.axis import ChipletAxis
from fusionfabric.rtl.chiplet.common import STATUS
from fusionfabric.tb.chiplet.harness import NODE_A, NODE_B, _Channel

__all__ = ["ChipletAxisPair", "NODE_A", "NODE_B"]


class ChipletAxisPair(wiring.Component):
    """Chiplet A (node 1) and chiplet B (node 2), each a :class:`ChipletAxis`, joined by
    two ``latency``-cycle PHY channels without faults.

    Members: ``a_s_axis_req_*`` ... ``b_m_axis_rsp_*`` (each side's four AXI4-Stream
    interfaces, named as on ``ChipletAxis`` with the side in front),
    ``a_o_axis_req_framing`` ... (its framing counters), ``i_link_up_a``/``i_link_up_b``
    and ``o_status_a``/``o_status_b``.
    """

    def __init__(self, latency=2, **params):
        if not isinstance(latency, int) or not 1 <= latency <= 256:
            raise ValueError(f"latency={latency!r} must be in 1..256")
        self.latency = latency
        self.params = params
        self.a = ChipletAxis(**params)
        self.b = ChipletAxis(**params)
        members = {}
        self._outer = []       # (side, name on ChipletAxis)
        for side, c in (("a", self.a), ("b", self.b)):
            for name, member in c.signature.members.items():
                if name.startswith(("s_axis_", "m_axis_", "o_axis_")):
                    members[f"{side}_{name}"] = member
                    self._outer.append((side, name))
            members[f"i_link_up_{side}"] = c.signature.members["i_link_up"]
            members[f"o_status_{side}"] = Out(STATUS.layout())
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.a = a = self.a
        m.submodules.b = b = self.b
        m.submodules.ab = ab = _Channel(self.latency)
        m.submodules.ba = ba = _Channel(self.latency)
        sides = {"a": a, "b": b}
        for side, name in self._outer:
            inner, outer = getattr(sides[side], name), getattr(self, f"{side}_{name}")
            if sides[side].signature.members[name].flow == wiring.In:
                m.d.comb += inner.eq(outer)
            else:
                m.d.comb += outer.eq(inner)
        for side, c, nid in (("a", a, NODE_A), ("b", b, NODE_B)):
            m.d.comb += [c.i_node_id.eq(nid), c.i_link_up.eq(getattr(self, f"i_link_up_{side}")),
                         getattr(self, f"o_status_{side}").eq(c.o_status)]
        connect(m, a.o_phy, ab.i_word)
        connect(m, ab.o_word, b.i_phy)
        connect(m, b.o_phy, ba.i_word)
        connect(m, ba.o_word, a.i_phy)
        for ch in (ab, ba):
            m.d.comb += [ch.i_err.eq(0), ch.i_drop.eq(0), ch.i_dark.eq(0)]
        return m
