"""A block whose constructor rejects a parameter leaves no ``UnusedElaboratable`` warning.

Amaranth registers an ``Elaboratable`` before its ``__init__`` runs, so every rejected
parameter leaves an object (and the subcomponents built before the check) that the garbage
collector later reports as "created but never used", under whichever test runs then.
``Block.build`` marks them (``rtl.blocks.disown_failed``). The check drives every integer
parameter of every block with -1, collects garbage, and counts the warnings; with the
marking disabled the same run must warn (the check can fail).
"""

from __future__ import annotations

import gc
import warnings

import pytest
from amaranth.back import verilog

from fusionfabric.rtl import blocks as rtl_blocks


def _warnings_after_rejected_builds() -> list[str]:
    all_blocks = rtl_blocks.all_blocks()
    # Amaranth stays silent until a design has been elaborated in the process
    verilog.convert(all_blocks["crc"].build(), emit_src=False)
    seen: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        old = warnings.showwarning
        warnings.showwarning = lambda message, *a, **k: seen.append(str(message))
        try:
            for block in all_blocks.values():
                for p in block.params:
                    if p.type is int:
                        with pytest.raises(rtl_blocks.BlockError):
                            block.build(**{p.name: -1})
            gc.collect()
        finally:
            warnings.showwarning = old
    return [m for m in seen if "created but never used" in m]


def test_rejected_parameters_leave_no_unused_elaboratable():
    assert _warnings_after_rejected_builds() == []


def test_the_check_sees_the_warnings_without_the_marking(monkeypatch):
    monkeypatch.setattr(rtl_blocks, "disown_failed", lambda exc: None)
    assert len(_warnings_after_rejected_builds()) > 0
