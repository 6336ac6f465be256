"""Layouts and small helpers shared by the chiplet RTL (built from :mod:`fusionfabric.formats.chiplet`)."""

from __future__ import annotations

from amaranth import Const, Mux, Signal

from fusionfabric.formats.chiplet import (PHY_WORD, PORT_BEAT, SEQ_BITS, STATUS, TL_FLIT, ChipletParams,
                                         Opcode)

__all__ = ["PHY_WORD", "TL_FLIT", "STATUS", "phy_layout", "tl_layout", "port_layout",
           "data_slots", "valid_opcode", "as_params", "LINK_DOWN",
           "LINK_INIT", "LINK_ACTIVE"]

LINK_DOWN, LINK_INIT, LINK_ACTIVE = 0, 1, 2


def phy_layout():
    return PHY_WORD.layout()


def tl_layout():
    return TL_FLIT.layout()


def port_layout():
    return PORT_BEAT.layout()


def data_slots(opcode, length):
    """RTL twin of :func:`fusionfabric.sim.chiplet.data_slots` (slots after the header)."""
    none = ((opcode == Opcode.READ) | (opcode == Opcode.WRITE_ACK)
            | (opcode == Opcode.ATOMIC_ACK) | (opcode == Opcode.NULL))
    return Mux(none, 0, (length + 1) * 4)


def valid_opcode(opcode, vc: int):
    ops = ([Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD, Opcode.MULTICAST, Opcode.REDUCE,
            Opcode.RESULT]
           if vc == 0 else [Opcode.READ_CPL, Opcode.WRITE_ACK, Opcode.ATOMIC_ACK])
    v = Const(0, 1)
    for o in ops:
        v = v | (opcode == o)
    return v


def as_params(params) -> ChipletParams:
    """``params`` itself if it is a :class:`ChipletParams`, the defaults if None."""
    if params is None:
        return ChipletParams()
    if not isinstance(params, ChipletParams):
        raise TypeError(f"params={params!r} must be a fusionfabric.formats.chiplet.ChipletParams")
    return params


def sat_inc(m, counter: Signal, cond):
    """``counter += 1`` on ``cond``, saturating."""
    top = (1 << len(counter)) - 1
    with m.If(cond & (counter != top)):
        m.d.sync += counter.eq(counter + 1)


def seq_dist(a, b):
    """``(a - b) mod 2**SEQ_BITS``."""
    return (a - b)[:SEQ_BITS]
