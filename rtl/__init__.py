"""Synthesizable Amaranth components of fusionfabric.

Every module that defines generatable blocks exposes a module-level ``BLOCKS`` list of
:class:`rtl.blocks.Block`; :func:`rtl.blocks.all_blocks` discovers them.
"""
