"""Bit layouts declared once and shared by the numpy models and the RTL.

A :class:`Fields` is an ordered list of ``(name, width)`` pairs, least significant first,
exactly like an ``amaranth.lib.data.StructLayout``. The numpy models pack and unpack
through it (vectorized, arbitrary width via Python ints or ``uint64`` columns), and the
RTL turns it into a ``StructLayout`` with :meth:`Fields.layout`, so model and hardware
cannot disagree on a bit position.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

__all__ = ["Fields", "FieldError"]


class FieldError(ValueError):
    """A value that does not fit its field, or an unknown field name."""


class Fields:
    """An ordered bit layout, field 0 at bit 0.

    Parameters
    ----------
    fields : iterable of (str, int)
        Field names and widths in bits, least significant first.
    """

    def __init__(self, fields: Iterable[tuple[str, int]]):
        self.fields: tuple[tuple[str, int], ...] = tuple((str(n), int(w)) for n, w in fields)
        self.offsets: dict[str, int] = {}
        self.widths: dict[str, int] = {}
        offset = 0
        for name, width in self.fields:
            if width <= 0:
                raise FieldError(f"field {name!r} has width {width}; must be positive")
            if name in self.offsets:
                raise FieldError(f"field {name!r} declared twice")
            self.offsets[name] = offset
            self.widths[name] = width
            offset += width
        self.width = offset

    def __repr__(self):
        return f"Fields({list(self.fields)!r})"

    def __iter__(self):
        return iter(self.fields)

    # -- scalar (Python int, any width) -----------------------------------------------
    def pack(self, values: Mapping[str, int] | None = None, **kw: int) -> int:
        """Pack field values into one integer; missing fields are zero."""
        values = {**(values or {}), **kw}
        word = 0
        for name, value in values.items():
            if name not in self.offsets:
                raise FieldError(f"unknown field {name!r} (fields: {', '.join(self.offsets)})")
            value = int(value)
            width = self.widths[name]
            if value < 0 or value >> width:
                raise FieldError(f"field {name}={value} does not fit in {width} bits")
            word |= value << self.offsets[name]
        return word

    def unpack(self, word: int) -> dict[str, int]:
        """Split one integer into its fields."""
        word = int(word)
        if word < 0 or word >> self.width:
            raise FieldError(f"word {word:#x} does not fit in {self.width} bits")
        return {
            name: (word >> self.offsets[name]) & ((1 << w) - 1) for name, w in self.fields
        }

    # -- vectorized (fields up to 64 bits, packed word as Python-int object array) ---------
    def unpack_array(self, words) -> dict[str, np.ndarray]:
        """Unpack a sequence of integers into one ``uint64`` column per field (<= 64 bits)."""
        arr = np.asarray([int(w) for w in words], dtype=object)
        out = {}
        for name, width in self.fields:
            if width > 64:
                raise FieldError(f"field {name!r} is {width} bits; unpack_array takes <= 64")
            mask = (1 << width) - 1
            out[name] = np.array(
                [(int(w) >> self.offsets[name]) & mask for w in arr], dtype=np.uint64
            )
        return out

    def pack_array(self, columns: Mapping[str, Iterable[int]]) -> list[int]:
        """Pack columns (one per field, equal lengths) into a list of integers."""
        cols = {k: [int(v) for v in vals] for k, vals in columns.items()}
        lengths = {len(v) for v in cols.values()}
        if len(lengths) > 1:
            raise FieldError(f"columns have different lengths: {sorted(lengths)}")
        n = lengths.pop() if lengths else 0
        return [self.pack({k: v[i] for k, v in cols.items()}) for i in range(n)]

    # -- RTL adapter ----------------------------------------------------------------------
    def layout(self):
        """The equivalent ``amaranth.lib.data.StructLayout`` (imports amaranth lazily)."""
        from amaranth.lib import data

        return data.StructLayout({name: width for name, width in self.fields})
