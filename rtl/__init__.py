"""Synthesizable Amaranth components of fusionfabric.

Every module that defines generatable blocks exposes a module-level ``BLOCKS`` list of
:class:`fusionfabric.rtl.blocks.Block`; :func:`fusionfabric.rtl.blocks.all_blocks` discovers them.
"""
