"""The board slice: the fabric BIST with LEDs and a UART report, and the UART itself
(docs/board.md). The platform wrapper and the build flow are in :mod:`fusionfabric.board`."""

from .slice import BoardSlice, report_fields
from .uart import HexReport, UartTx, report_items

__all__ = ["BoardSlice", "HexReport", "UartTx", "report_fields", "report_items"]
