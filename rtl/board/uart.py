"""A UART transmitter and a counter reporter that prints one text line per period.

The board slice (:mod:`fusionfabric.rtl.board.slice`) prints its BIST counters with these
two: :class:`HexReport` turns a snapshot of its inputs into ASCII bytes, and
:class:`UartTx` sends them 8N1. ``docs/board.md`` gives the line format.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.blocks import Block, Param

__all__ = ["UartTx", "HexReport", "report_items", "BLOCKS"]


class UartTx(wiring.Component):
    """8N1 UART transmitter of a byte stream.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit (>= 2): ``f_clk / baud`` rounded, e.g. 217 for 115,200 baud
        at 25 MHz (0.04 % fast).

    Members
    -------
    i_data : In(stream.Signature(8))
        Bytes to send; taken (``ready``) only while the line is idle.
    o_tx : Out(1)
        The line, registered, idle high: a start bit (0), bits 0..7 LSB first, a stop bit
        (1), each ``divisor`` cycles long.

    Timing
    ------
    The start bit begins the cycle after a byte is taken; the next byte is taken in the
    last cycle of the stop bit's ``divisor`` cycles at the earliest, so back-to-back bytes
    are sent at 10 bit times each. Reset: idle.
    """

    def __init__(self, divisor: int = 217):
        if not isinstance(divisor, int) or isinstance(divisor, bool) or divisor < 2:
            raise ValueError(f"divisor={divisor!r} must be an integer >= 2")
        self.divisor = divisor
        super().__init__({"i_data": In(stream.Signature(8)), "o_tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        shift = Signal(9)                       # data bits then the stop bit
        bits = Signal(range(11))                # bit times left, the current one included
        count = Signal(range(self.divisor))     # cycles left in the current bit
        done = (bits == 1) & (count == 0)       # the stop bit's last cycle
        m.d.comb += self.i_data.ready.eq((bits == 0) | done)
        with m.If(self.i_data.valid & self.i_data.ready):
            m.d.sync += [self.o_tx.eq(0), shift.eq(Cat(self.i_data.payload, Const(1, 1))),
                         bits.eq(10), count.eq(self.divisor - 1)]
        with m.Elif(bits != 0):
            with m.If(count == 0):
                m.d.sync += [bits.eq(bits - 1), count.eq(self.divisor - 1)]
                with m.If(bits != 1):
                    m.d.sync += [self.o_tx.eq(shift[0]), shift.eq(shift >> 1)]
            with m.Else():
                m.d.sync += count.eq(count - 1)
        return m


def report_items(fields: list[tuple[str, int]]) -> list[int | tuple[int, int]]:
    """The items of one report line: an ``int`` is a constant byte, ``(field, nibble)``
    a hex digit of a field (nibble 0 = least significant).

    The line is ``name=HEX name=HEX ...\\r\\n``: every field in order, separated by one
    space, in upper-case hex of ``ceil(width / 4)`` digits, most significant first.
    """
    items: list[int | tuple[int, int]] = []
    for k, (name, width) in enumerate(fields):
        items += [ord(c) for c in (" " if k else "") + name + "="]
        items += [(k, j) for j in reversed(range((width + 3) // 4))]
    return items + [ord("\r"), ord("\n")]


class HexReport(wiring.Component):
    """Prints a snapshot of its inputs as one ASCII line every ``period`` cycles.

    Parameters
    ----------
    fields : list of (str, int)
        Name and width of each input; a name is letters, digits and ``_``, starting with a
        letter. Input member ``i_<name>``.
    period : int
        Cycles from one line's start to the next (>= 1). A line that takes longer delays
        the next; no line is cut short.

    Members
    -------
    i_<name> : In(width)
        The values, all latched in the same cycle at the start of a line.
    o_data : Out(stream.Signature(8))
        The line's bytes (:func:`report_items`), registered.

    Timing
    ------
    The first line starts in the first cycle after reset. Reset: idle.
    """

    def __init__(self, fields: list[tuple[str, int]], period: int = 1 << 24):
        fields = [(str(n), int(w)) for n, w in fields]
        if not fields:
            raise ValueError("fields=[] : at least one field")
        for name, width in fields:
            if not (name[:1].isalpha() and name.replace("_", "").isalnum() and name.isascii()):
                raise ValueError(f"field name {name!r} must be letters, digits and _")
            if width < 1:
                raise ValueError(f"field {name!r} width={width!r} must be positive")
        if len({n for n, _ in fields}) != len(fields):
            raise ValueError(f"field names {[n for n, _ in fields]!r} repeat")
        if not isinstance(period, int) or period < 1:
            raise ValueError(f"period={period!r} must be a positive integer")
        self.fields, self.period = fields, period
        self.items = report_items(fields)
        super().__init__({**{f"i_{n}": In(w) for n, w in fields},
                          "o_data": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        snap = [Signal(w, name=f"snap_{n}") for n, w in self.fields]
        items = self.items
        idx = Signal(range(len(items)))
        busy = Signal()
        timer = Signal(range(self.period))
        byte = self.o_data.payload
        m.d.comb += self.o_data.valid.eq(busy)
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)

        def hex_digit(k, j):
            value = snap[k]
            nib = Signal(4, name=f"nib_{k}_{j}")
            m.d.comb += nib.eq(value[4 * j:4 * j + 4])
            return Mux(nib < 10, nib + ord("0"), nib + (ord("A") - 10))

        with m.If(~busy):
            with m.If(timer == 0):
                m.d.sync += [busy.eq(1), idx.eq(0), byte.eq(items[0]),
                             timer.eq(self.period - 1)]
                m.d.sync += [s.eq(getattr(self, f"i_{n}")) for s, (n, _) in
                             zip(snap, self.fields)]
        with m.Elif(self.o_data.ready):
            with m.If(idx == len(items) - 1):
                m.d.sync += busy.eq(0)
            with m.Else():
                m.d.sync += idx.eq(idx + 1)
                # the next byte is registered (a sync Switch): Icarus never evaluates a
                # combinational lookup whose inputs stay constant from time 0
                with m.Switch(idx + 1):
                    for i, item in enumerate(items[1:], start=1):
                        with m.Case(i):
                            m.d.sync += byte.eq(item if isinstance(item, int)
                                                else hex_digit(*item))
        return m


def _uart_build(divisor=217):
    return UartTx(divisor)


BLOCKS = [
    Block("uart-tx", _uart_build, doc="8N1 UART transmitter of a byte stream (docs/board.md)",
          params=[Param("divisor", int, 217, "clock cycles per bit (>= 2)")]),
]
