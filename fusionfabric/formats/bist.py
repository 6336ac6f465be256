"""Formats of the built-in self-test: LFSR, seeds, data signature, parameters, control word.

Shared by the BIST RTL (:mod:`fusionfabric.rtl.bist`, :mod:`fusionfabric.rtl.fabric.bist`) and
its numpy model (:mod:`fusionfabric.sim.bist`, whose module docstring states the signature
function and the checker's counting rules; docs/bist.md). Every random choice comes from
the PRBS31 polynomial x^31 + x^28 + 1 (ITU-T O.150): a Fibonacci LFSR whose 31-bit state
holds the last 31 bits, bit k = ``b[t-1-k]``, stepping ``b[t] = b[t-31] ^ b[t-28]``. Seeds
are spread by SplitMix64 (Steele, Lea, Flood, OOPSLA 2014).
"""

from __future__ import annotations

from .bitfields import Fields
from .switch import DEST_BITS, SRC_BITS

__all__ = ["LFSR_ORDER", "LFSR_TAP", "BIST_SEQ_BITS", "BEAT_BITS", "SIG_BITS", "SIGNATURE",
           "FILL_SALT", "FILL_WARMUP", "PATTERNS", "COUNTER_MAX", "MAX_PORTS", "splitmix64",
           "seed_state", "check_width", "check_params", "check_port_params", "check_seed",
           "PORT_DATA_BITS", "PORT_LENGTHS", "PORT_BEATS_PER_CODE", "PORT_STREAMS",
           "PORT_FAULTS", "PORT_FLIP_BIT", "BIST_CONTROL", "check_port_gen_params"]

LFSR_ORDER = 31
LFSR_TAP = 28
_MASK31 = (1 << LFSR_ORDER) - 1
BIST_SEQ_BITS = 16
BEAT_BITS = 8
SIGNATURE = Fields([("beat", BEAT_BITS), ("seq", BIST_SEQ_BITS), ("dest", DEST_BITS),
                    ("src", SRC_BITS)])
SIG_BITS = SIGNATURE.width
FILL_SALT = 0x5A5A_5A5A & _MASK31
FILL_WARMUP = 2 * LFSR_ORDER
PATTERNS = ("uniform", "permutation")
COUNTER_MAX = (1 << 32) - 1
MAX_PORTS = 1 << DEST_BITS


def splitmix64(x: int) -> int:
    """SplitMix64 output function (Steele, Lea, Flood 2014) of a 64-bit ``x``."""
    m = (1 << 64) - 1
    z = (int(x) + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def seed_state(seed: int, port: int, stream: int) -> int:
    """Initial (non-zero) PRBS31 state of LFSR ``stream`` of ``port`` for ``seed``."""
    seed, port, stream = int(seed), int(port), int(stream)
    if not 0 <= seed < (1 << 32):
        raise ValueError(f"seed={seed} must be a 32-bit unsigned integer")
    return 1 + splitmix64((seed << 16) + port * 4 + stream) % _MASK31


def check_width(data_width: int) -> None:
    if not isinstance(data_width, int) or data_width < SIG_BITS:
        raise ValueError(f"data_width={data_width!r} must be an integer >= {SIG_BITS} "
                         f"(the {SIG_BITS}-bit signature)")


def check_port_params(data_width, n_ports, port) -> None:
    """Raise ValueError naming the first bad one of ``data_width``, ``n_ports``, ``port``."""
    check_width(data_width)
    if not isinstance(n_ports, int) or not 1 <= n_ports <= MAX_PORTS:
        raise ValueError(f"n_ports={n_ports!r} must be an integer in 1..{MAX_PORTS}")
    if not isinstance(port, int) or not 0 <= port < n_ports:
        raise ValueError(f"port={port!r} must be in 0..{n_ports - 1}")


def check_seed(seed) -> None:
    if not isinstance(seed, int) or not 0 <= seed < (1 << 32):
        raise ValueError(f"seed={seed!r} must be a 32-bit unsigned integer")


def check_params(data_width, n_ports, port, max_len, pattern, offset, seed) -> None:
    """Raise ValueError naming the first bad generator parameter."""
    check_port_params(data_width, n_ports, port)
    if not isinstance(max_len, int) or not 1 <= max_len <= (1 << BEAT_BITS):
        raise ValueError(f"max_len={max_len!r} must be in 1..{1 << BEAT_BITS}")
    if pattern not in PATTERNS:
        raise ValueError(f"pattern={pattern!r} is not one of {', '.join(PATTERNS)}")
    if not isinstance(offset, int) or offset < 0 or (pattern == "permutation"
                                                     and offset >= n_ports):
        raise ValueError(f"offset={offset!r} must be in 0..{n_ports - 1}")
    check_seed(seed)


# -- fabric BIST at the accelerator port (rtl/fabric/bist.py) ----------------------------------
#: Bits of data per accelerator-port beat (``fusionfabric.formats.chiplet.PORT_BEAT``: one 16-byte slot).
PORT_DATA_BITS = 128
#: Message lengths in bytes by length code (= ``fusionfabric.formats.chiplet.LENGTHS``), 4 beats per 64 bytes.
PORT_LENGTHS = (64, 128, 192, 256)
PORT_BEATS_PER_CODE = 4
#: LFSR streams of the port generator and checker (:func:`seed_state`; 0..2 are the switch
#: BIST's): 3 message draws, 4 load, 5 the checker's backpressure.
PORT_STREAMS = {"message": 3, "load": 4, "stall": 5}
#: Planted faults of a port generator (test only): ``flip`` inverts data bit
#: :data:`PORT_FLIP_BIT` of every beat of message ``fault_at``; ``skip`` gives message
#: ``fault_at`` the sequence number one past the right one (one number skipped).
PORT_FAULTS = ("none", "flip", "skip")
PORT_FLIP_BIT = 100
#: The fabric BIST control word (``FabricBist.i_bist``), LSB first.
BIST_CONTROL = Fields([("enable", 1), ("load", 9), ("stall", 8), ("budget", 32)])


def check_port_gen_params(n_endpoints, endpoint, max_bytes, seed, fault="none",
                          fault_at=0) -> None:
    """Raise ValueError naming the first bad parameter of a port generator."""
    if not isinstance(n_endpoints, int) or not 2 <= n_endpoints <= MAX_PORTS:
        raise ValueError(f"n_endpoints={n_endpoints!r} must be an integer in 2..{MAX_PORTS}")
    if not isinstance(endpoint, int) or not 0 <= endpoint < n_endpoints:
        raise ValueError(f"endpoint={endpoint!r} must be in 0..{n_endpoints - 1}")
    if max_bytes not in PORT_LENGTHS:
        raise ValueError(f"max_bytes={max_bytes!r} is not one of "
                         f"{', '.join(map(str, PORT_LENGTHS))}")
    check_seed(seed)
    if fault not in PORT_FAULTS:
        raise ValueError(f"fault={fault!r} is not one of {', '.join(PORT_FAULTS)}")
    if not isinstance(fault_at, int) or not 0 <= fault_at < (1 << 32):
        raise ValueError(f"fault_at={fault_at!r} must be a 32-bit unsigned integer")
