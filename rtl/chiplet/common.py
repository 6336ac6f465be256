"""Layouts and small helpers shared by the chiplet RTL (built from :mod:`fusionfabric.formats.chiplet`)."""

from __future__ import annotations

from amaranth import Const, Mux, Signal, Value
from amaranth.lib import data, fifo

from fusionfabric.formats.chiplet import (DL_HEADER, DL_TRAILER, PHY_WORD, PORT_BEAT, SEQ_BITS,
                                          NON_POSTED, SLOT_BITS, SLOTS_PER_TL, STATUS, TL_FLIT,
                                          TL_HEADER, ChipletParams, LinkState, Opcode)

__all__ = ["PHY_WORD", "TL_FLIT", "STATUS", "phy_layout", "tl_layout", "port_layout",
           "beat_slots_layout", "trailer_layout", "tl_slots_layout", "data_slots", "valid_opcode",
           "nonposted",
           "as_params", "register_fifo", "LINK_DOWN",
           "LINK_INIT", "LINK_ACTIVE", "LINK_FAILED"]

LINK_DOWN, LINK_INIT, LINK_ACTIVE, LINK_FAILED = (int(s) for s in LinkState)


def phy_layout():
    return PHY_WORD.layout()


def tl_layout():
    return TL_FLIT.layout()


def port_layout():
    return PORT_BEAT.layout()


def beat_slots_layout():
    """``PORT_BEAT`` seen as its two slots: ``data`` and ``hdr`` (a ``TL_HEADER``).

    The same bits as :func:`port_layout` (``PORT_BEAT`` is the data slot followed by the
    ``TL_HEADER`` fields), grouped so that the header slot reads and writes as one view.
    """
    assert PORT_BEAT.fields == (("data", SLOT_BITS),) + TL_HEADER.fields
    return data.StructLayout({"data": SLOT_BITS, "hdr": TL_HEADER.layout()})


def trailer_layout():
    """The trailer slot of a DL flit: ``hdr`` (a ``DL_HEADER``) and ``crc`` (``DL_TRAILER``)."""
    assert DL_TRAILER.fields == DL_HEADER.fields + (("crc", DL_TRAILER.widths["crc"]),)
    return data.StructLayout({"hdr": DL_HEADER.layout(), "crc": DL_TRAILER.widths["crc"]})


def tl_slots_layout():
    """``TL_FLIT.data`` as its ``SLOTS_PER_TL`` slots, slot 0 in the low bits."""
    assert TL_FLIT.widths["data"] == SLOTS_PER_TL * SLOT_BITS
    return data.ArrayLayout(SLOT_BITS, SLOTS_PER_TL)


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


def nonposted(opcode):
    """The opcode is a request that gets a completion (``NON_POSTED``: WRITE, READ,
    ATOMIC_ADD)."""
    v = opcode == NON_POSTED[0]
    for o in NON_POSTED[1:]:
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


def register_fifo(m, name: str, src, dst) -> fifo.SyncFIFO:
    """``src`` to ``dst`` (streams, payloads of the same width) through a 2-entry register
    FIFO (:class:`amaranth.lib.fifo.SyncFIFO`, submodule ``name``), returned for its
    ``level``: one cycle of latency at full throughput; ``src.ready`` and ``dst.valid``
    come from its level register, so neither side's handshake logic reaches the other."""
    payload = Value.cast(src.payload)
    m.submodules[name] = q = fifo.SyncFIFO(width=len(payload), depth=2)
    m.d.comb += [q.w_en.eq(src.valid), q.w_data.eq(payload), src.ready.eq(q.w_rdy),
                 dst.valid.eq(q.r_rdy), Value.cast(dst.payload).eq(q.r_data),
                 q.r_en.eq(dst.ready)]
    return q
