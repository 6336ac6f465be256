"""Formats shared by the RTL and the golden models: bit layouts, protocol constants, widths.

This package is a leaf: its modules import numpy, the standard library and each other,
never ``fusionfabric.rtl``, ``fusionfabric.sim`` or ``fusionfabric.tb``. The RTL builds its
``data.StructLayout`` views from the :class:`~fusionfabric.formats.bitfields.Fields` declared
here and the numpy models pack and unpack through the same declarations, so a bit position
is written once.

Modules
-------
bitfields
    :class:`~fusionfabric.formats.bitfields.Fields`, an ordered bit layout with scalar and
    vectorized pack/unpack and an Amaranth ``StructLayout`` adapter.
switch
    The switch port flit, the group-table entry and the reduction codes.
"""
