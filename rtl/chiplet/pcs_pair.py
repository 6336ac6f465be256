"""Old import path of the PHY adapters, kept for compatibility: they live in
:mod:`rtl.chiplet.phy`; the PCS link harness ``ChipletPcsPair`` moved to
:mod:`tb.chiplet.harness`."""

from .phy import PcsToPhy, PhyToPcs

__all__ = ["PhyToPcs", "PcsToPhy"]
