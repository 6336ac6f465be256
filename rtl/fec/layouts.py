"""Beat layouts of the RS(544,514) blocks, declared once for the RTL and the testbenches.

A codeword of 544 symbols travels as ``544 / P`` beats of ``P`` symbols. Symbol ``k`` of
beat ``b`` is codeword position ``b * P + k`` (position 0 is the first transmitted symbol,
the coefficient of x^543) and sits in bits ``10k .. 10k+9`` of ``data``.
"""

from __future__ import annotations

from fusionfabric.formats import fec as code
from fusionfabric.formats.bitfields import Fields

__all__ = ["SYMBOL_BITS", "check_symbols_per_beat", "in_fields", "enc_out_fields",
           "dec_out_fields", "COUNT_BITS"]

SYMBOL_BITS = code.M
#: Width of ``n_corrected``: 0..T corrected symbols.
COUNT_BITS = code.T.bit_length()


def check_symbols_per_beat(P) -> int:
    """Return ``P`` if it is an int dividing 544; ``ValueError``/``TypeError`` otherwise."""
    if isinstance(P, bool) or not isinstance(P, int):
        raise TypeError(f"P={P!r} must be an int")
    if P < 1 or code.N % P:
        divisors = [d for d in range(1, code.N + 1) if code.N % d == 0]
        raise ValueError(f"P={P} must divide {code.N} (one of {divisors})")
    return P


def in_fields(P: int) -> Fields:
    """Input beat of both blocks: ``data`` (P symbols) and ``first`` (first beat of a
    codeword)."""
    return Fields([("data", SYMBOL_BITS * P), ("first", 1)])


def enc_out_fields(P: int) -> Fields:
    """Encoder output beat: ``data`` (message symbols, then parity), ``first``, ``last``."""
    return Fields([("data", SYMBOL_BITS * P), ("first", 1), ("last", 1)])


def dec_out_fields(P: int) -> Fields:
    """Decoder output beat.

    ``data``: the symbols, corrected; ``error``: bit ``k`` set where symbol ``k`` was
    changed (the per-position error strobe); ``first``/``last`` framing; on the ``last``
    beat only: ``corrected`` (the codeword had errors and all were corrected),
    ``uncorrectable`` and ``n_corrected`` (symbols changed; 0 when uncorrectable).
    """
    return Fields([("data", SYMBOL_BITS * P), ("error", P), ("first", 1), ("last", 1),
                   ("corrected", 1), ("uncorrectable", 1), ("n_corrected", COUNT_BITS)])
