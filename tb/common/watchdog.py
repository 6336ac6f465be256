"""A watchdog that fails a test that makes no progress for N cycles."""

from __future__ import annotations

import cocotb
from cocotb.triggers import RisingEdge

__all__ = ["Watchdog", "StallError"]


class StallError(AssertionError):
    pass


class Watchdog:
    """Counts clock cycles since the last :meth:`kick`; past ``cycles`` the test fails.

    Drivers, monitors and scoreboards call :meth:`kick` when something moves. The error
    names the watchdog, the stall length and the seed, followed by ``report()`` if a
    testbench set one (a description of what is pending, taken when the stall is found).
    """

    def __init__(self, clk, cycles: int, name: str = "watchdog", seed: int | None = None):
        if cycles < 1:
            raise ValueError(f"watchdog cycles={cycles} must be positive")
        self.clk = clk
        self.cycles = cycles
        self.name = name
        self.seed = seed
        self.idle = 0
        self.now = 0
        self._task = None
        self.note = ""
        self.report = None       # optional () -> str, appended to the StallError

    def kick(self, note: str = ""):
        self.idle = 0
        if note:
            self.note = note

    def start(self):
        if self._task is None:
            self._task = cocotb.start_soon(self._run())
        return self

    def stop(self):
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self):
        while True:
            await RisingEdge(self.clk)
            self.now += 1
            self.idle += 1
            if self.idle > self.cycles:
                msg = (f"{self.name}: no progress for {self.cycles} cycles at cycle "
                       f"{self.now} (last: {self.note or 'nothing'}; seed {self.seed})")
                if self.report is not None:
                    try:
                        msg += "\n" + self.report()
                    except Exception as exc:     # the stall is the finding, not the report
                        msg += f"\n(stall report failed: {exc!r})"
                raise StallError(msg)
