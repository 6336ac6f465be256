"""Test harnesses for the chiplet link (not product blocks; rtl/ holds only synthesizable
components): :class:`ChipletPair` (two chiplets back to back through fault channels) and
:class:`ChipletPcsPair` (the same through the 2-lane 64b/66b PCS and the PHY adapters of
:mod:`fusionfabric.rtl.chiplet.phy`). The cocotb testbench is tb/chiplet/link.py; pytest runs them through
``fusionfabric.tb.common.runner.run("chiplet-pair", "fusionfabric.tb.chiplet.test_link", component=...)``.
"""

from __future__ import annotations

from amaranth import Module, ResetInserter, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from fusionfabric.rtl.chiplet import Chiplet, PcsToPhy, PhyToPcs
from fusionfabric.rtl.chiplet.common import PHY_WORD, STATUS, port_layout, sat_inc
from fusionfabric.rtl.pcs import PcsRx, PcsTx

__all__ = ["ChipletPair", "ChipletPcsPair", "NODE_A", "NODE_B"]

NODE_A, NODE_B = 1, 2


class _Channel(wiring.Component):
    """``latency``-cycle pipe of PHY words; XORs ``i_err`` into the word entering it,
    deletes it on ``i_drop``, and passes nothing while ``i_dark``.

    Counters of the DL flits sent into it (flit boundaries from the words' ``first``):
    ``o_hit_flits`` flits with a word hit by any fault; ``o_err_flits`` flits with a word
    hit by ``i_err``; ``o_lost_flits`` flits with a word deleted (``i_drop`` or
    ``i_dark``). A flit both hit and cut is in both of the last two."""

    def __init__(self, latency):
        self.latency = latency
        super().__init__({
            "i_word": In(stream.Signature(PHY_WORD.layout())),
            "o_word": Out(stream.Signature(PHY_WORD.layout())),
            "i_err": In(PHY_WORD.width),
            "i_drop": In(1),
            "i_dark": In(1),
            "o_hit_flits": Out(16),
            "o_err_flits": Out(16),
            "o_lost_flits": Out(16),
            "o_words": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i_word.ready.eq(1)
        v = self.i_word.valid
        word = self.i_word.payload.as_value() ^ self.i_err
        stages = [(Signal(name=f"v{i}"), Signal(PHY_WORD.width, name=f"w{i}"))
                  for i in range(self.latency)]
        pv, pw = v & ~self.i_drop & ~self.i_dark, word
        for sv, sw in stages:
            m.d.sync += [sv.eq(pv), sw.eq(pw)]
            pv, pw = sv, sw
        m.d.comb += [self.o_word.valid.eq(pv), self.o_word.payload.eq(pw)]
        # flits hit by an error or a drop (flit boundaries taken from the sent words)
        hit = Signal()
        hits = Signal(16)
        words = Signal(32)
        m.d.comb += [self.o_hit_flits.eq(hits), self.o_words.eq(words)]
        bad = (self.i_err != 0) | self.i_drop | self.i_dark
        kinds = [(bad, hit, hits)]
        for name, cond, out in (("err", self.i_err != 0, self.o_err_flits),
                                ("lost", self.i_drop | self.i_dark, self.o_lost_flits)):
            flag, count = Signal(name=f"{name}_hit"), Signal(16, name=f"{name}_flits")
            m.d.comb += out.eq(count)
            kinds.append((cond, flag, count))
        with m.If(v):
            sat_inc(m, words, 1)
            for cond, flag, count in kinds:
                with m.If(self.i_word.payload.first):
                    m.d.sync += flag.eq(cond)
                    sat_inc(m, count, cond)
                with m.Else():
                    m.d.sync += flag.eq(flag | cond)
                    sat_inc(m, count, cond & ~flag)
        return m


def _pair_members(err_width: int, resets: bool = False) -> dict:
    """The members both pair harnesses share: each side's four accelerator ports, link-up
    input and status; each direction's fault inputs (``i_err`` of ``err_width`` bits) and
    hit/word counters; with ``resets``, ``i_rst_a``/``i_rst_b``: a reset of one chiplet
    alone (the rest of the harness keeps running)."""
    sig = {}
    if resets:
        sig["i_rst_a"] = In(1)
        sig["i_rst_b"] = In(1)
    for side in ("a", "b"):
        for port, flow in (("i_req", In), ("o_req", Out), ("i_rsp", In), ("o_rsp", Out)):
            sig[f"{side}_{port}"] = flow(stream.Signature(port_layout()))
        sig[f"i_link_up_{side}"] = In(1)
        sig[f"o_status_{side}"] = Out(STATUS.layout())
    for d in ("ab", "ba"):
        sig[f"i_err_{d}"] = In(err_width)
        sig[f"i_drop_{d}"] = In(1)
        sig[f"i_dark_{d}"] = In(1)
        sig[f"o_hit_{d}"] = Out(16)
        sig[f"o_words_{d}"] = Out(32)
    return sig


class ChipletPair(wiring.Component):
    """Chiplet A (node 1) and chiplet B (node 2) joined by two fault channels.

    Members: ``a_i_req`` ... ``b_o_rsp`` (the four accelerator ports of each side),
    ``i_err_ab``/``i_drop_ab``/``i_dark_ab`` (and ``_ba``) fault inputs applied to the word
    entering the channel that cycle, ``i_link_up_a``/``i_link_up_b``, ``o_status_a``/
    ``o_status_b``, ``o_hit_ab``/``o_hit_ba`` (flits hit by a fault), of which
    ``o_err_flits_*`` hit by ``i_err`` and ``o_lost_flits_*`` cut by ``i_drop``/``i_dark``
    (:class:`_Channel`). With
    ``resets=True`` also ``i_rst_a``/``i_rst_b``: while high, that chiplet alone is held in
    reset (a peer reset, docs/protocol.md "Peer reset and link reset").
    """

    def __init__(self, latency=4, resets=False, **params):
        if not isinstance(latency, int) or not 1 <= latency <= 256:
            raise ValueError(f"latency={latency!r} must be in 1..256")
        self.latency = latency
        self.resets = bool(resets)
        self.params = params
        self.a = Chiplet(**params)
        self.b = Chiplet(**params)
        sig = _pair_members(PHY_WORD.width, self.resets)
        for d in ("ab", "ba"):
            sig[f"o_err_flits_{d}"] = Out(16)
            sig[f"o_lost_flits_{d}"] = Out(16)
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        if self.resets:
            m.submodules.a = ResetInserter(self.i_rst_a)(a)
            m.submodules.b = ResetInserter(self.i_rst_b)(b)
        else:
            m.submodules.a = a
            m.submodules.b = b
        m.submodules.ab = ab = _Channel(self.latency)
        m.submodules.ba = ba = _Channel(self.latency)
        for side, c, nid in (("a", a, NODE_A), ("b", b, NODE_B)):
            for port in ("i_req", "i_rsp"):
                connect(m, flipped(getattr(self, f"{side}_{port}")), getattr(c, port))
            for port in ("o_req", "o_rsp"):
                connect(m, getattr(c, port), flipped(getattr(self, f"{side}_{port}")))
            m.d.comb += [c.i_node_id.eq(nid), c.i_link_up.eq(getattr(self, f"i_link_up_{side}")),
                         getattr(self, f"o_status_{side}").eq(c.o_status)]
        connect(m, a.o_phy, ab.i_word)
        connect(m, ab.o_word, b.i_phy)
        connect(m, b.o_phy, ba.i_word)
        connect(m, ba.o_word, a.i_phy)
        for d, ch in (("ab", ab), ("ba", ba)):
            m.d.comb += [ch.i_err.eq(getattr(self, f"i_err_{d}")),
                         ch.i_drop.eq(getattr(self, f"i_drop_{d}")),
                         ch.i_dark.eq(getattr(self, f"i_dark_{d}")),
                         getattr(self, f"o_hit_{d}").eq(ch.o_hit_flits),
                         getattr(self, f"o_err_flits_{d}").eq(ch.o_err_flits),
                         getattr(self, f"o_lost_flits_{d}").eq(ch.o_lost_flits),
                         getattr(self, f"o_words_{d}").eq(ch.o_words)]
        return m


class ChipletPcsPair(wiring.Component):
    """Like :class:`ChipletPair`, but each direction runs chiplet →
    :class:`PhyToPcs` → ``PcsTx`` (2 lanes) → lanes (XOR ``i_err_*``: 2 × 66 bits, delay
    ``latency``) → ``PcsRx`` → :class:`PcsToPhy` → chiplet (the adapters built with the
    chiplet's ``tl_per_dl`` and ``start_every``; ``PcsToPhy.i_link_up`` is the PCS
    receiver's ``o_link_up``), and each chiplet's ``i_link_up`` is its PCS receiver's
    ``o_link_up`` AND ``i_link_up_*``. ``resets=True`` adds ``i_rst_a``/``i_rst_b`` as in
    :class:`ChipletPair` (the chiplet alone: its PCS and adapters keep running).
    ``i_dark_*`` darkens both lanes of a direction, ``i_dark_lanes_*`` (2 bits) lane k
    alone (a dark lane carries zeros)."""

    def __init__(self, latency=4, am_period=64, start_every=16, resets=False, **params):
        self.latency = latency
        self.am_period = am_period
        self.start_every = start_every
        self.resets = bool(resets)
        self.params = params
        self.a = Chiplet(**params)
        self.b = Chiplet(**params)
        sig = _pair_members(132, self.resets)
        for side in ("a", "b"):
            sig[f"o_pcs_up_{side}"] = Out(1)
        for d in ("ab", "ba"):
            sig[f"o_starts_{d}"] = Out(32)
            sig[f"i_dark_lanes_{d}"] = In(2)
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        if self.resets:
            m.submodules.a = ResetInserter(self.i_rst_a)(a)
            m.submodules.b = ResetInserter(self.i_rst_b)(b)
        else:
            m.submodules.a = a
            m.submodules.b = b
        pcs_up = {}
        for d, src, dst in (("ab", a, b), ("ba", b, a)):
            tl = src.params.tl_per_dl
            tx_ad = PhyToPcs(tl, self.start_every)
            tx = PcsTx(n_lanes=2, am_period=self.am_period)
            rx = PcsRx(n_lanes=2, am_period=self.am_period, max_skew=1, ber_window=4096)
            rx_ad = PcsToPhy(tl)
            m.submodules[f"{d}_txad"] = tx_ad
            m.submodules[f"{d}_pcstx"] = tx
            m.submodules[f"{d}_pcsrx"] = rx
            m.submodules[f"{d}_rxad"] = rx_ad
            connect(m, src.o_phy, tx_ad.i_word)
            connect(m, tx_ad.o_row, tx.i_data)
            err = getattr(self, f"i_err_{d}")
            dark_all = getattr(self, f"i_dark_{d}")
            dark_lanes = getattr(self, f"i_dark_lanes_{d}")
            hits = Signal(16, name=f"hits_{d}")
            words = Signal(32, name=f"words_{d}")
            sat_inc(m, hits, err != 0)
            sat_inc(m, words, src.o_phy.valid & src.o_phy.ready)
            starts = Signal(32, name=f"starts_{d}")     # START rows sent
            sat_inc(m, starts, tx_ad.o_row.valid & tx_ad.o_row.ready & ~tx_ad.i_word.ready)
            m.d.comb += [getattr(self, f"o_starts_{d}").eq(starts),
                         getattr(self, f"o_hit_{d}").eq(hits),
                         getattr(self, f"o_words_{d}").eq(words)]
            for k in range(2):
                lane = tx.o_lanes[k] ^ err[66 * k:66 * k + 66]
                for i in range(self.latency):
                    nxt = Signal(66, name=f"{d}_lane{k}_d{i}")
                    m.d.sync += nxt.eq(lane)
                    lane = nxt
                # a dark lane carries zeros (invalid sync headers: the receiver loses lock)
                dark = dark_all | dark_lanes[k]
                m.d.comb += rx.i_lanes[k].eq(lane & ~dark.replicate(66))
            m.d.comb += [rx_ad.i_row.valid.eq(rx.o_data.valid),
                         rx_ad.i_row.payload.eq(rx.o_data.payload),
                         rx_ad.i_link_up.eq(rx.o_link_up)]
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
