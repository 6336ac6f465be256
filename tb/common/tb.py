"""The testbench base class: clock, reset, seed and a watchdog in one place."""

from __future__ import annotations

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from .env import make_rng, seed, sim_name, tb_args, tb_params
from .watchdog import Watchdog

__all__ = ["TB"]


class TB:
    """Base of every testbench (the Forencich/cocotb shape).

    Starts a clock on ``dut.clk`` (period ``period_ns``), owns the seeded RNG, the block
    parameters (``self.params``), the test arguments (``self.args``) and a
    :class:`Watchdog` that fails the test after ``stall_cycles`` cycles without
    progress. Subclasses add drivers, monitors and a scoreboard, and ``kick`` the
    watchdog from them.
    """

    def __init__(self, dut, period_ns: int = 10, stall_cycles: int = 10_000):
        self.dut = dut
        self.clk = dut.clk
        self.rst = dut.rst
        self.params = tb_params()
        self.args = tb_args()
        self.seed = seed()
        self.sim = sim_name()
        self.rng = make_rng(0)
        self.log = dut._log
        Clock(self.clk, period_ns, unit="ns").start()
        self.watchdog = Watchdog(self.clk, stall_cycles, name=type(self).__name__,
                                 seed=self.seed)
        self.log.info("seed %d sim %s params %s", self.seed, self.sim, self.params)

    async def reset(self, cycles: int = 4):
        self.rst.value = 1
        await ClockCycles(self.clk, cycles)
        self.rst.value = 0
        await RisingEdge(self.clk)

    async def cycles(self, n: int):
        await ClockCycles(self.clk, n)

    def start_watchdog(self):
        self.watchdog.start()
        return self.watchdog
