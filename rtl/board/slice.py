"""The fabric slice that goes on a board: the fabric with its BIST, LEDs and a UART report.

:class:`BoardSlice` has only board-level ports (eight LEDs and a UART line), so a platform
wrapper (``fusionfabric.board``) connects it to any board's pins. ``docs/board.md`` is the
spec: what each LED means and the format of the report line.
"""

from __future__ import annotations

from dataclasses import replace

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.chiplet import LinkState
from fusionfabric.rtl.bist import COUNTER_BITS
from fusionfabric.rtl.blocks import Block, Param
from fusionfabric.rtl.fabric.bist import FabricBist, _block_params as _bist_params
from fusionfabric.rtl.fabric.fabric import lane_bits
from fusionfabric.rtl.fabric.fault import ber_threshold

from .uart import HexReport, UartTx

__all__ = ["BoardSlice", "report_fields", "LED_BITS", "BLOCKS"]

#: What each LED shows, bit by bit (docs/board.md).
LED_BITS = ("heartbeat", "links_active", "traffic", "pass", "fail", "link_failed",
            "errors", "done")


def report_fields(n_endpoints: int) -> list[tuple[str, int]]:
    """The report line's fields (name, width), in order (docs/board.md)."""
    fields = [("t", 32)]
    for e in range(n_endpoints):
        fields += [(f"g{e}", COUNTER_BITS), (f"c{e}", COUNTER_BITS), (f"s{e}", COUNTER_BITS),
                   (f"d{e}", COUNTER_BITS), (f"u{e}", COUNTER_BITS), (f"l{e}", 4),
                   (f"r{e}", 16)]
    return fields + [("f", 1), ("ok", 4)]


class BoardSlice(wiring.Component):
    """:class:`~fusionfabric.rtl.fabric.bist.FabricBist` with a pass/fail summary on eight
    LEDs and its counters printed over a UART (block ``board-slice``).

    Every generator runs with ``load`` and ``budget`` from the parameters from reset on;
    checker backpressure is off; no group is configured. While ``i_fault_en`` is high
    (a switch on the board), every lane's fault injector flips bits at ``fault_ber``;
    the links repair the errors (replays), so the BIST stays clean.

    Parameters
    ----------
    divisor : int
        UART clock cycles per bit (217: 115,200 baud at 25 MHz).
    report_period : int
        Cycles from one report line to the next (2**24: 0.67 s at 25 MHz).
    heartbeat_bit : int
        Bit of the free-running cycle counter shown on the heartbeat LED (23: 1.5 Hz at
        25 MHz).
    load : int
        Generator offered load in 1/256 (1..256).
    budget : int
        Messages per generator, 0 = forever.
    fault_ber : float
        Bit error rate of every lane while ``i_fault_en`` is high (0 < ber <= 1/66 on
        64b/66b lanes: at most one flip per lane word).
    **bist_params
        Any :class:`FabricBist` parameter (``n_endpoints``, ``fault``, ...).

    Members
    -------
    i_fault_en : In(1)
        Lane errors on (asynchronous: two synchronizer flip-flops). Each change sends one
        ``i_fault`` beat to the fabric: every lane at ``fault_ber``, or every lane clean.
    o_led : Out(8)
        :data:`LED_BITS`, LSB first.
    o_tx : Out(1)
        UART line, 8N1, idle high.
    """

    def __init__(self, divisor: int = 217, report_period: int = 1 << 24,
                 heartbeat_bit: int = 23, load: int = 256, budget: int = 0,
                 fault_ber: float = 1e-5, **bist_params):
        if not isinstance(heartbeat_bit, int) or not 0 <= heartbeat_bit < 32:
            raise ValueError(f"heartbeat_bit={heartbeat_bit!r} must be in 0..31")
        if not isinstance(load, int) or not 1 <= load <= 256:
            raise ValueError(f"load={load!r} must be an integer in 1..256")
        if not isinstance(budget, int) or not 0 <= budget < 1 << 32:
            raise ValueError(f"budget={budget!r} must be an integer in 0..2**32-1")
        if not isinstance(fault_ber, (int, float)) or not fault_ber > 0:
            raise ValueError(f"fault_ber={fault_ber!r} must be positive")
        self.bist = FabricBist(**bist_params)
        fab = self.bist.fabric
        # the lane word's width sets the threshold (66 bits, or an FEC lane's); a rate above
        # one flip per word raises ValueError naming fault_ber
        self.fault_threshold = ber_threshold(fault_ber, lane_bits(fab.lane_profile,
                                                                  fab.fec_symbols))
        self.n_endpoints = n = self.bist.n_endpoints
        self.uart = UartTx(divisor)
        self.report = HexReport(report_fields(n), report_period)
        self.heartbeat_bit, self.load, self.budget = heartbeat_bit, load, budget
        super().__init__({"i_fault_en": In(1), "o_led": Out(8), "o_tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        n = self.n_endpoints
        m.submodules.bist = bist = self.bist
        m.submodules.uart = uart = self.uart
        m.submodules.report = rep = self.report
        wiring.connect(m, rep.o_data, uart.i_data)
        m.d.comb += self.o_tx.eq(uart.o_tx)
        # idle inputs carry zeros, not X (Icarus, docs/fabric.md)
        m.d.comb += [bist.i_config.valid.eq(0), bist.i_config.payload.eq(0),
                     bist.i_bist.enable.eq(1), bist.i_bist.load.eq(self.load),
                     bist.i_bist.stall.eq(0), bist.i_bist.budget.eq(self.budget)]
        cycles = Signal(32)
        m.d.sync += cycles.eq(cycles + 1)

        # lane faults: one i_fault beat per change of the synchronized switch
        fault_en = Signal()
        m.submodules.fault_sync = FFSynchronizer(self.i_fault_en, fault_en)
        fault_set = Signal()        # the setting the fabric has taken
        beat = bist.i_fault
        m.d.comb += [beat.valid.eq(fault_en != fault_set), beat.payload.all.eq(1),
                     beat.payload.lane.eq(0), beat.payload.dark.eq(0),
                     beat.payload.slip.eq(0),
                     beat.payload.threshold.eq(Mux(fault_en, self.fault_threshold, 0))]
        with m.If(beat.valid & beat.ready):
            m.d.sync += fault_set.eq(fault_en)

        active = Signal()
        failed_now = Signal()
        errors_now = Signal()
        checked = Signal()
        m.d.comb += [
            active.eq(Cat(*[(s.state == LinkState.ACTIVE)
                            for e in range(n)
                            for s in (bist.o_ep_status[e], bist.o_sw_status[e])]).all()),
            failed_now.eq(Cat(*[(s.state == LinkState.FAILED)
                                for e in range(n)
                                for s in (bist.o_ep_status[e], bist.o_sw_status[e])]).any()),
            errors_now.eq(Cat(*[c[e] != 0 for e in range(n)
                                for c in (bist.o_seq_errors, bist.o_data_errors,
                                          bist.o_unexpected)]).any()),
            checked.eq(Cat(*[bist.o_chk_messages[e] != 0 for e in range(n)]).all()),
        ]
        link_failed = Signal()      # sticky
        errors = Signal()           # sticky
        with m.If(failed_now):
            m.d.sync += link_failed.eq(1)
        with m.If(errors_now):
            m.d.sync += errors.eq(1)
        fail = link_failed | errors
        ok = Signal()
        m.d.comb += ok.eq(active & checked & ~fail)
        done = bist.o_gen_done.all() if self.budget else 0
        m.d.comb += self.o_led.eq(Cat(cycles[self.heartbeat_bit], active,
                                      bist.o_chk_messages[0][8], ok, fail, link_failed,
                                      errors, done))
        m.d.comb += [rep.i_t.eq(cycles), rep.i_f.eq(fault_set),
                     rep.i_ok.eq(Cat(ok, fail, link_failed, errors))]
        for e in range(n):
            ep, sw = bist.o_ep_status[e], bist.o_sw_status[e]
            m.d.comb += [getattr(rep, f"i_g{e}").eq(bist.o_gen_messages[e]),
                         getattr(rep, f"i_c{e}").eq(bist.o_chk_messages[e]),
                         getattr(rep, f"i_s{e}").eq(bist.o_seq_errors[e]),
                         getattr(rep, f"i_d{e}").eq(bist.o_data_errors[e]),
                         getattr(rep, f"i_u{e}").eq(bist.o_unexpected[e]),
                         getattr(rep, f"i_l{e}").eq(Cat(ep.state, sw.state)),
                         getattr(rep, f"i_r{e}").eq(ep.replays)]
        return m


def _build(**params):
    return BoardSlice(**params)


#: The fabric parameters whose board default differs from the fabric's: 2 endpoints, and
#: the crosspoint-buffered switch, the faster switch on the FPGA (docs/board.md).
_BOARD_DEFAULTS = {"n_endpoints": 2, "switch_mode": "crosspoint"}


BLOCKS = [
    Block("board-slice", _build, doc="The fabric BIST with LEDs and a UART counter report, "
          "the top of the board build (docs/board.md)",
          params=[Param("divisor", int, 217, "UART clock cycles per bit"),
                  Param("report_period", int, 1 << 24, "cycles between report lines"),
                  Param("heartbeat_bit", int, 23, "cycle-counter bit on the heartbeat LED"),
                  Param("load", int, 256, "generator offered load in 1/256"),
                  Param("budget", int, 0, "messages per generator, 0 = forever"),
                  Param("fault_ber", float, 1e-5, "lane bit error rate while i_fault_en"),
                  *[replace(p, default=_BOARD_DEFAULTS[p.name]) if p.name in _BOARD_DEFAULTS
                    else p for p in _bist_params()]],
          ci_params={"n_endpoints": 2}),
]
