"""Test harness: two chiplets joined through the 64b/66b PCS (rtl/pcs) and faulty lanes."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from rtl.pcs import PcsRx, PcsTx

from .chiplet import Chiplet
from .common import STATUS, port_layout, sat_inc
from .pair import NODE_A, NODE_B
from .phy import PcsToPhy, PhyToPcs

__all__ = ["ChipletPcsPair", "PhyToPcs", "PcsToPhy"]


class ChipletPcsPair(wiring.Component):
    """Like :class:`rtl.chiplet.pair.ChipletPair`, but each direction runs chiplet →
    :class:`PhyToPcs` → ``PcsTx`` (2 lanes) → lanes (XOR ``i_err_*``: 2 × 66 bits, delay
    ``latency``) → ``PcsRx`` → :class:`PcsToPhy` → chiplet, and each chiplet's
    ``i_link_up`` is its PCS receiver's ``o_link_up`` AND ``i_link_up_*``."""

    def __init__(self, latency=4, am_period=64, **params):
        self.latency = latency
        self.am_period = am_period
        self.params = params
        self.a = Chiplet(**params)
        self.b = Chiplet(**params)
        sig = {}
        for side in ("a", "b"):
            for port, flow in (("i_req", In), ("o_req", Out), ("i_rsp", In), ("o_rsp", Out)):
                sig[f"{side}_{port}"] = flow(stream.Signature(port_layout()))
            sig[f"i_link_up_{side}"] = In(1)
            sig[f"o_status_{side}"] = Out(STATUS.layout())
            sig[f"o_pcs_up_{side}"] = Out(1)
        for d in ("ab", "ba"):
            sig[f"i_err_{d}"] = In(132)
            sig[f"i_drop_{d}"] = In(1)
            sig[f"i_dark_{d}"] = In(1)
            sig[f"o_hit_{d}"] = Out(16)
            sig[f"o_words_{d}"] = Out(32)
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        m.submodules.a = a = self.a
        m.submodules.b = b = self.b
        pcs_up = {}
        for d, src, dst in (("ab", a, b), ("ba", b, a)):
            tx_ad = PhyToPcs()
            tx = PcsTx(n_lanes=2, am_period=self.am_period)
            rx = PcsRx(n_lanes=2, am_period=self.am_period, max_skew=1, ber_window=4096)
            rx_ad = PcsToPhy()
            m.submodules[f"{d}_txad"] = tx_ad
            m.submodules[f"{d}_pcstx"] = tx
            m.submodules[f"{d}_pcsrx"] = rx
            m.submodules[f"{d}_rxad"] = rx_ad
            connect(m, src.o_phy, tx_ad.i_word)
            connect(m, tx_ad.o_row, tx.i_data)
            err = getattr(self, f"i_err_{d}")
            dark = getattr(self, f"i_dark_{d}")
            hits = Signal(16, name=f"hits_{d}")
            words = Signal(32, name=f"words_{d}")
            sat_inc(m, hits, err != 0)
            sat_inc(m, words, src.o_phy.valid & src.o_phy.ready)
            m.d.comb += [getattr(self, f"o_hit_{d}").eq(hits),
                         getattr(self, f"o_words_{d}").eq(words)]
            for k in range(2):
                lane = tx.o_lanes[k] ^ err[66 * k:66 * k + 66]
                for i in range(self.latency):
                    nxt = Signal(66, name=f"{d}_lane{k}_d{i}")
                    m.d.sync += nxt.eq(lane)
                    lane = nxt
                # a dark lane carries zeros (invalid sync headers: the receiver loses lock)
                m.d.comb += rx.i_lanes[k].eq(lane & ~dark.replicate(66))
            m.d.comb += [rx_ad.i_row.valid.eq(rx.o_data.valid),
                         rx_ad.i_row.payload.eq(rx.o_data.payload)]
            connect(m, rx_ad.o_word, dst.i_phy)
            pcs_up[dst] = rx.o_link_up
        for side, c, nid in (("a", a, NODE_A), ("b", b, NODE_B)):
            for port in ("i_req", "i_rsp"):
                connect(m, flipped(getattr(self, f"{side}_{port}")), getattr(c, port))
            for port in ("o_req", "o_rsp"):
                connect(m, getattr(c, port), flipped(getattr(self, f"{side}_{port}")))
            m.d.comb += [c.i_node_id.eq(nid),
                         c.i_link_up.eq(pcs_up[c] & getattr(self, f"i_link_up_{side}")),
                         getattr(self, f"o_pcs_up_{side}").eq(pcs_up[c]),
                         getattr(self, f"o_status_{side}").eq(c.o_status)]
        return m
