"""cocotb test of the board slice (block ``board-slice``, rtl/board/slice.py) through its
board pins only: eight LEDs and the UART line.

The test reads what a person at the board would see. It records every edge of ``o_tx``
(no Python runs per cycle), decodes the 8N1 bytes itself (falling edge, then the middle of
each bit), splits them into report lines and parses ``name=HEX`` fields. The reference is
:func:`fusionfabric.sim.bist.port_traffic` (the numpy model of every generator's messages)
with :func:`fusionfabric.tb.fabric.test_bist.expected_errors` for a planted fault: each
generator's message count, each checker's count and its error counters must be exactly
the model's, every link ACTIVE, and the LEDs must say pass (or fail, with a planted fault).
Consecutive lines' cycle stamps must be exactly ``report_period`` apart.

Test arguments: ``max_cycles`` (default 80,000), ``poll`` (cycles between decodes,
default 2,000), ``report`` (JSON file: the last line's fields, the LEDs, cycles),
``fault`` (``[start, cycles]``: ``i_fault_en`` high for ``cycles`` cycles from ``start``
cycles after reset, as the board's switch would be; the links must then show replays and
the BIST must stay exactly clean).
"""

from __future__ import annotations

import json
import re

import cocotb
from cocotb.triggers import ReadOnly, Timer
from cocotb.utils import get_sim_time

from fusionfabric.rtl.board.slice import LED_BITS
from fusionfabric.sim.bist import port_traffic
from fusionfabric.tb.common.stream import to_int
from fusionfabric.tb.common.tb import TB
from fusionfabric.tb.fabric.test_bist import expected_errors

PERIOD_NS = 10
_FIELD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=([0-9A-F]+)")


def decode_edges(edges: list[tuple[float, int]], divisor: int, end: float) -> bytes:
    """Bytes of an 8N1 line given as ``(cycle, level)`` changes (idle high before the
    first), decoded up to cycle ``end``. A byte whose stop bit is not high raises."""

    def level(t: float) -> int:
        v = 1
        for te, ve in edges:
            if te > t:
                break
            v = ve
        return v

    out, busy_until = bytearray(), -1.0
    for t0, v in edges:
        if v != 0 or t0 < busy_until:
            continue
        if t0 + 10 * divisor > end:
            break
        bits = [level(t0 + (k + 0.5) * divisor) for k in range(10)]
        assert bits[0] == 0, f"start bit not low in its middle (cycle {t0})"
        assert bits[9] == 1, f"framing error: stop bit low (cycle {t0})"
        out.append(sum(b << k for k, b in enumerate(bits[1:9])))
        busy_until = t0 + 9.5 * divisor
    return bytes(out)


def parse_lines(text: str) -> list[dict[str, int]]:
    """The complete report lines of ``text`` as field dicts."""
    lines = text.split("\r\n")[:-1]        # the last piece is an unfinished line
    return [{k: int(v, 16) for k, v in _FIELD.findall(line)} for line in lines]


@cocotb.test()
async def test_slice(dut):
    tb = TB(dut)
    p, a = tb.params, tb.args
    n = int(p.get("n_endpoints", 2))
    budget, divisor = int(p["budget"]), int(p["divisor"])
    period = int(p["report_period"])
    assert budget > 0, "the test needs a finite budget"
    max_cycles, poll = int(a.get("max_cycles", 80_000)), int(a.get("poll", 2_000))
    ref = port_traffic(n, budget, int(p.get("max_bytes", 256)), int(p.get("bist_seed", 1)),
                       faults={0: (p.get("fault", "none"), int(p.get("fault_at", 0)))})
    errors = expected_errors(p, ref, n)
    want = {"ok": 0b1010 if p.get("fault", "none") != "none" else 0b0001}
    for e in range(n):
        want.update({f"g{e}": budget, f"c{e}": sum(ref["count"][s][e] for s in range(n)),
                     f"s{e}": errors[e][0], f"d{e}": errors[e][1], f"u{e}": 0,
                     f"l{e}": 0b1010})    # endpoint and switch side ACTIVE (2)

    edges: list[tuple[float, int]] = []
    t_zero = get_sim_time("ns") / PERIOD_NS

    async def record():
        while True:
            await dut.o_tx.value_change
            edges.append((get_sim_time("ns") / PERIOD_NS - t_zero, to_int(dut.o_tx.value)))

    dut.i_fault_en.value = 0
    await tb.reset()
    t_zero = get_sim_time("ns") / PERIOD_NS
    cocotb.start_soon(record())
    fault = a.get("fault")

    async def fault_switch(start, cycles):
        await Timer(int(start) * PERIOD_NS, unit="ns")
        dut.i_fault_en.value = 1
        await Timer(int(cycles) * PERIOD_NS, unit="ns")
        dut.i_fault_en.value = 0

    if fault:
        cocotb.start_soon(fault_switch(*fault))
    lines: list[dict[str, int]] = []
    waited = 0
    while True:
        await Timer(poll * PERIOD_NS, unit="ns")
        waited += poll
        now = get_sim_time("ns") / PERIOD_NS - t_zero
        lines = parse_lines(decode_edges(edges, divisor, now).decode("ascii"))
        if lines and all(lines[-1].get(k) == v for k, v in want.items() if k[0] in "gc"):
            break
        assert waited < max_cycles, (
            f"no report line with every message counted after {waited} cycles (seed "
            f"{tb.seed}); last line {lines[-1] if lines else None}, want {want}")
    await ReadOnly()
    leds = to_int(dut.o_led.value)
    last = lines[-1]
    led = {name: (leds >> i) & 1 for i, name in enumerate(LED_BITS)}
    tb.log.info("%d lines; last %s; LEDs %s", len(lines), last, led)
    if a.get("report"):
        with open(a["report"], "w") as f:
            json.dump({"lines": lines, "leds": led, "cycles": waited, "seed": tb.seed}, f)
    wrong = {k: (last.get(k), v) for k, v in want.items() if last.get(k) != v}
    assert not wrong, f"report fields (got, want): {wrong} (seed {tb.seed})"
    stamps = [ln["t"] for ln in lines]
    assert all(b - a_ == period for a_, b in zip(stamps, stamps[1:])), \
        f"line stamps {stamps} not {period} cycles apart (seed {tb.seed})"
    if fault:
        replays = [last[f"r{e}"] for e in range(n)]
        assert sum(replays) > 0, f"lane faults on, but no replay: {replays} (seed {tb.seed})"
        # each line's f against the switch at its snapshot (stamps counted from reset;
        # 10 cycles of slack at each edge for the synchronizer and the reset offset)
        start, cycles = (int(v) for v in fault)
        want_f = [1 if start + 10 <= ln["t"] <= start + cycles - 10 else
                  0 if ln["t"] < start or ln["t"] > start + cycles + 10 else None
                  for ln in lines]
        got_f = [ln["f"] for ln in lines]
        assert any(w == 1 for w in want_f) and all(
            w is None or w == g for w, g in zip(want_f, got_f)), \
            f"report's f field {got_f}, want {want_f} (seed {tb.seed})"
    fault = p.get("fault", "none") != "none"
    assert led["links_active"] == 1 and led["done"] == 1 and led["link_failed"] == 0, \
        f"LEDs {led} (seed {tb.seed})"
    assert (led["pass"], led["fail"], led["errors"]) == ((0, 1, 1) if fault else (1, 0, 0)), \
        f"LEDs {led} (seed {tb.seed})"
