"""Test harness (not a registered block): ``pcs-tx`` and ``pcs-rx`` side by side in one
top level, so that a cocotb testbench can carry the transmitter's lanes through a
:class:`fusionfabric.tb.common.lanes.LaneChannel` into the receiver. Every port of both keeps its name
(``i_data``, ``o_lanes`` from the transmitter; ``i_lanes``, ``o_data``, ``o_*`` status from
the receiver)."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring

from fusionfabric.rtl.pcs import PcsRx, PcsTx

__all__ = ["PcsLoopback"]


def _walk(obj, path):
    for p in path:
        obj = obj[p] if isinstance(p, int) else getattr(obj, p)
    return obj


class PcsLoopback(wiring.Component):
    def __init__(self, n_lanes: int = 4, am_period: int = 64, max_skew: int = 4,
                 ber_window: int = 19531, serdes_width: int = 66):
        self.tx = PcsTx(n_lanes, am_period, serdes_width)
        self.rx = PcsRx(n_lanes, am_period, max_skew, ber_window, serdes_width)
        self.n_lanes, self.am_period, self.serdes_width = n_lanes, am_period, serdes_width
        self.max_skew, self.ber_window = max_skew, ber_window
        members = {**self.tx.signature.members, **self.rx.signature.members}
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx = self.tx
        m.submodules.rx = self.rx
        for sub in (self.tx, self.rx):
            for path, member, value in sub.signature.flatten(sub):
                mine = _walk(self, path)
                if member.flow == wiring.In:
                    m.d.comb += value.eq(mine)
                else:
                    m.d.comb += mine.eq(value)
        return m
