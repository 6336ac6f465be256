"""Bit layouts and codes shared across blocks (switch port flits, group table, reductions).

Declared once here; the RTL builds its ``StructLayout`` from these :class:`Fields` and the
models pack/unpack through them. Block-private layouts (64b/66b blocks, DL flits) live in
their own ``sim`` modules, built the same way.
"""

from __future__ import annotations

from enum import IntEnum

from fusionfabric.formats.bitfields import Fields

__all__ = [
    "Kind", "Op", "Dtype", "Mode", "DEST_BITS", "SRC_BITS", "CHUNK_BITS", "GROUP_BITS",
    "switch_flit", "group_entry", "DTYPE_BITS", "CANONICAL_QNAN",
]

#: Width of the destination field: a port id (unicast) or a group id (multicast/reduce).
DEST_BITS = 8
#: Width of the source port id stamped by the switch at ingress.
SRC_BITS = 8
#: Width of a reduction chunk id.
CHUNK_BITS = 16
#: Width of a group id (multicast and reduction groups share one table).
GROUP_BITS = 8


class Kind(IntEnum):
    """What a switch port flit is."""
    UNICAST = 0      #: ``dest`` is the output port
    MULTICAST = 1    #: ``dest`` is a group id; delivered once to every member
    REDUCE = 2       #: a contribution to group ``dest``, chunk ``chunk``
    RESULT = 3       #: a reduction result for group ``dest``, chunk ``chunk``


class Op(IntEnum):
    SUM = 0
    MIN = 1
    MAX = 2


class Dtype(IntEnum):
    INT32 = 0
    UINT32 = 1
    FP32 = 2
    FP16 = 3
    BF16 = 4


DTYPE_BITS = {Dtype.INT32: 32, Dtype.UINT32: 32, Dtype.FP32: 32, Dtype.FP16: 16,
              Dtype.BF16: 16}

#: The one quiet NaN a reduction emits whenever a NaN appears or is produced.
CANONICAL_QNAN = {Dtype.FP32: 0x7FC0_0000, Dtype.FP16: 0x7E00, Dtype.BF16: 0x7FC0}


class Mode(IntEnum):
    ALLREDUCE = 0    #: result multicast to every member
    REDUCE = 1       #: result to ``root`` only


def switch_flit(data_width: int) -> Fields:
    """The flit on every switch port, in and out (LSB first).

    ``data`` carries a TL flit (or a slice of one) opaquely; the sideband fields route it.
    ``src`` is stamped by the switch at ingress (what a source writes there is ignored).
    A packet is the flits from ``first`` to ``last`` on one (input, output) pair and stays
    contiguous there.
    """
    if data_width < 1:
        raise ValueError(f"data_width={data_width} must be positive")
    return Fields([
        ("data", data_width),
        ("first", 1),
        ("last", 1),
        ("kind", 2),
        ("dest", DEST_BITS),
        ("src", SRC_BITS),
        ("chunk", CHUNK_BITS),
    ])


def group_entry(n_ports: int) -> Fields:
    """One group-table entry, as written through the switch's configuration port."""
    if n_ports < 1:
        raise ValueError(f"n_ports={n_ports} must be positive")
    return Fields([
        ("members", n_ports),   # bit p set: port p is a member
        ("op", 2),              # Op
        ("dtype", 3),           # Dtype
        ("mode", 1),            # Mode
        ("root", DEST_BITS),    # result port when mode == REDUCE
        ("native", 1),          # 1: fp16/bf16 accumulate natively (round every step)
        ("valid", 1),
    ])
