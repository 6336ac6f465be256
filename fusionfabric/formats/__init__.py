"""Formats shared by the RTL and the golden models: bit layouts, protocol constants, widths.

This package is a leaf: its modules import numpy, the standard library and each other,
never ``fusionfabric.rtl``, ``fusionfabric.sim`` or ``fusionfabric.tb``. The RTL builds its
``data.StructLayout`` views from the :class:`~fusionfabric.formats.bitfields.Fields` declared
here and the numpy models pack and unpack through the same declarations, so a bit position
is written once.

Modules
-------
bist
    The built-in self-test's PRBS31 LFSR, seeds, data signature, parameter checks and the
    fabric BIST control word.
bitfields
    :class:`~fusionfabric.formats.bitfields.Fields`, an ordered bit layout with scalar and
    vectorized pack/unpack and an Amaranth ``StructLayout`` adapter.
chiplet
    The chiplet link's TL and DL layouts, opcodes, widths, PHY parameter checks and
    :class:`~fusionfabric.formats.chiplet.ChipletParams`.
fec
    The RS(544,514) code of the FEC profile: sizes, GF(2^10) tables, generator, symbol bit
    order (IEEE 802.3 cl. 91).
pcs
    64b/66b sync headers, block and marker layouts, control block types, lock constants and
    parameter checks (IEEE 802.3 cl. 49, cl. 82).
primitives
    The CRC catalogue and beat layouts, the cl. 49 scrambler polynomial, the O.150 PRBS taps.
switch
    The switch port flit, the group-table entry and the reduction codes.
"""
