"""Pure-numpy golden models, the cycle-level fabric model, traffic, statistics and workloads.

Nothing here imports amaranth, cocotb or :mod:`fusionfabric.rtl`; the bit layouts and
constants shared with the RTL come from :mod:`fusionfabric.formats`.
"""
