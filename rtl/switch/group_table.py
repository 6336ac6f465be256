"""The switch group table (group id → members and reduction settings) and its config port."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.switch import GROUP_BITS, group_entry

__all__ = ["GroupTable", "config_layout"]


def config_layout(n_ports: int) -> data.StructLayout:
    """Payload of the configuration port: ``{group, entry}``."""
    return data.StructLayout({"group": GROUP_BITS, "entry": group_entry(n_ports).layout()})


class GroupTable(wiring.Component):
    """``n_groups`` entries of ``fusionfabric.sim.layouts.group_entry(n_ports)``, written through a
    configuration stream and read by ``n_lookups`` combinational lookups.

    Parameters
    ----------
    n_ports : int
        Width of the member bitmap.
    n_groups : int
        Entries, 1 … 256.
    n_lookups : int
        Read ports (one per switch input).

    Members
    -------
    i_config : In(stream.Signature(config_layout(n_ports)))
        Always ready. A beat writes entry ``group``; ``group >= n_groups`` is dropped and
        counted.
    i_group : In(GROUP_BITS).array(n_lookups)
        Looked-up group per read port.
    o_entry : Out(group_entry(n_ports).layout()).array(n_lookups)
        The entry (all zero, hence not ``valid``, when ``i_group >= n_groups``).
    o_config_drops : Out(32)
        Configuration beats dropped for a bad group.

    Timing
    ------
    A write in cycle t is seen by lookups from t+1. Reset clears every entry (invalid).
    """

    def __init__(self, n_ports: int, n_groups: int, n_lookups: int):
        if not isinstance(n_groups, int) or not 1 <= n_groups <= 1 << GROUP_BITS:
            raise ValueError(f"n_groups={n_groups!r} must be in 1..{1 << GROUP_BITS}")
        self.n_ports = n_ports
        self.n_groups = n_groups
        self.n_lookups = n_lookups
        entry = group_entry(n_ports).layout()
        super().__init__({
            "i_config": In(stream.Signature(config_layout(n_ports))),
            "i_group": In(GROUP_BITS).array(n_lookups),
            "o_entry": Out(entry).array(n_lookups),
            "o_config_drops": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        entry = group_entry(self.n_ports).layout()
        # Registers, not a Memory: synchronous reset must invalidate every entry.
        table = [Signal(entry, name=f"entry{g}") for g in range(self.n_groups)]
        cfg = self.i_config
        m.d.comb += cfg.ready.eq(1)
        with m.If(cfg.valid):
            with m.If(cfg.payload.group < self.n_groups):
                with m.Switch(cfg.payload.group):
                    for g in range(self.n_groups):
                        with m.Case(g):
                            m.d.sync += table[g].eq(cfg.payload.entry)
            with m.Else():
                m.d.sync += self.o_config_drops.eq(self.o_config_drops + 1)
        for k in range(self.n_lookups):
            with m.Switch(self.i_group[k]):
                for g in range(self.n_groups):
                    with m.Case(g):
                        m.d.comb += self.o_entry[k].eq(table[g])
        return m
