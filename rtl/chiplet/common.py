"""Layouts and small helpers shared by the chiplet RTL (built from :mod:`fusionfabric.formats.chiplet`)."""

from __future__ import annotations

from amaranth import Const, Mux, Signal

from fusionfabric.formats.chiplet import (PHY_WORD, PORT_BEAT, SEQ_BITS, STATUS, TL_FLIT, ChipletParams,
                                         Opcode)

__all__ = ["PHY_WORD", "TL_FLIT", "STATUS", "phy_layout", "tl_layout", "port_layout",
           "data_slots", "valid_opcode", "check_params", "LINK_DOWN",
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


def check_params(tl_per_dl, replay_depth, rx_credits, replay_timeout, close_timeout):
    """Validate the chiplet parameters (the numpy model's rules) or raise ValueError."""
    for name, value in (("tl_per_dl", tl_per_dl), ("replay_depth", replay_depth),
                        ("rx_credits", rx_credits), ("replay_timeout", replay_timeout),
                        ("close_timeout", close_timeout)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name}={value!r} must be an int")
    return ChipletParams(tl_per_dl=tl_per_dl, replay_depth=replay_depth, rx_credits=rx_credits,
                         replay_timeout=replay_timeout, close_timeout=close_timeout)


def sat_inc(m, counter: Signal, cond):
    """``counter += 1`` on ``cond``, saturating."""
    top = (1 << len(counter)) - 1
    with m.If(cond & (counter != top)):
        m.d.sync += counter.eq(counter + 1)


def seq_dist(a, b):
    """``(a - b) mod 2**SEQ_BITS``."""
    return (a - b)[:SEQ_BITS]
