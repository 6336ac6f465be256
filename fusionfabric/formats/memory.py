"""Formats of the memory target behind a chiplet's accelerator port (``cpu`` endpoints).

Shared by the RTL (:class:`fusionfabric.rtl.fabric.memory.MemTarget`) and the numpy model
(:mod:`fusionfabric.sim.memory`): the size rule and the status word. The request semantics
are specified in docs/fabric.md, "Memory target (cpu endpoints)".
"""

from __future__ import annotations

from .bitfields import Fields

__all__ = ["WORD_BYTES", "MIN_MEM_BYTES", "MAX_MEM_BYTES", "COUNTER_BITS", "MEM_STATUS",
           "check_mem_bytes"]

#: Bytes per memory word: one accelerator-port beat (a 16-byte slot).
WORD_BYTES = 16
#: Smallest memory: one message of the shortest length (64 bytes).
MIN_MEM_BYTES = 64
#: Largest memory the block accepts (2**16 words of 16 bytes; the Verilog holds one
#: initial-value line per word).
MAX_MEM_BYTES = 1 << 20
#: Width of every status counter (saturating).
COUNTER_BITS = 32

#: ``o_status`` of the memory target (LSB first; counters saturate at 2**32 - 1).
MEM_STATUS = Fields([
    ("reads", COUNTER_BITS),     # READ requests completed OK
    ("writes", COUNTER_BITS),    # WRITE requests completed OK
    ("atomics", COUNTER_BITS),   # ATOMIC_ADD requests completed OK
    ("errors", COUNTER_BITS),    # requests completed with status ERROR (any opcode)
    ("dropped", COUNTER_BITS),   # beats dropped: opcode not served (not WRITE/READ/ATOMIC_ADD)
])


def check_mem_bytes(mem_bytes) -> int:
    """``mem_bytes`` if it is a power of two in MIN_MEM_BYTES..MAX_MEM_BYTES, else ValueError
    naming it."""
    if (not isinstance(mem_bytes, int) or isinstance(mem_bytes, bool)
            or not MIN_MEM_BYTES <= mem_bytes <= MAX_MEM_BYTES
            or mem_bytes & (mem_bytes - 1)):
        raise ValueError(f"mem_bytes={mem_bytes!r} must be a power of two in "
                         f"{MIN_MEM_BYTES}..{MAX_MEM_BYTES}")
    return mem_bytes
