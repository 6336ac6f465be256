"""The board slice's UART transmitter and counter report (rtl/board/uart.py), under
Amaranth's simulator.

References, independent of the RTL: an 8N1 receiver written here (falling edge, then one
sample in the middle of each bit) and Python's own hex formatting (``f"{v:0{n}X}"``) of
the values the testbench drives.
"""

import random
import re

import pytest
from amaranth.sim import Simulator

from fusionfabric.rtl.blocks import disown_failed
from fusionfabric.rtl.board.uart import HexReport, UartTx
from fusionfabric.tb.common.amaranth_stream import StreamReceiver, StreamSender


def decode_8n1(line: list[int], divisor: int) -> list[int]:
    """Bytes of an 8N1 line sampled once per clock (1 = idle). Raises AssertionError on a
    framing error (start bit not low in its middle, stop bit not high)."""
    out, i, half = [], 1, divisor // 2
    while i < len(line):
        if line[i - 1] == 1 and line[i] == 0:
            assert i + 9 * divisor + half < len(line), f"byte cut off at sample {i}"
            assert line[i + half] == 0, f"start bit not low in its middle at {i}"
            bits = [line[i + divisor * (k + 1) + half] for k in range(8)]
            assert line[i + 9 * divisor + half] == 1, f"framing error (stop bit) at {i}"
            out.append(sum(b << k for k, b in enumerate(bits)))
            i += 9 * divisor + half
        i += 1
    return out


def _run(dut, *benches, clock=True):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for b in benches:
        sim.add_testbench(b)
    sim.run()


@pytest.mark.parametrize("divisor", [2, 3, 7, 16])
def test_uart_tx_sends_every_byte(divisor):
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    data = [rng.randrange(256) for _ in range(40)] + [0x00, 0xFF, 0x55, 0xAA]
    dut = UartTx(divisor)
    tx = StreamSender(dut.i_data, data, seed=seed, idle=0.5)
    line = []
    total = (len(data) * 10 + 8) * divisor * 3

    async def watch(ctx):
        line.append(ctx.get(dut.o_tx))          # the reset level, before the first edge
        for _ in range(total):
            await ctx.tick()
            line.append(ctx.get(dut.o_tx))

    _run(dut, tx.run, watch)
    assert decode_8n1(line, divisor) == data, f"seed {seed}"
    # every level lasts a whole number of bit times from the first start bit
    start = line.index(0)
    edges = [i for i in range(start + 1, len(line)) if line[i] != line[i - 1]]
    assert all((e - start) % divisor == 0 for e in edges), f"seed {seed}"


@pytest.mark.parametrize("divisor", [2, 5])
def test_uart_tx_back_to_back_at_ten_bit_times(divisor):
    """Bytes always offered: each takes exactly 10 bit times, no idle bit between them."""
    data = list(range(0x30, 0x30 + 12))
    dut = UartTx(divisor)
    tx = StreamSender(dut.i_data, data)
    line = []

    async def watch(ctx):
        line.append(ctx.get(dut.o_tx))
        for _ in range((len(data) * 10 + 4) * divisor):
            await ctx.tick()
            line.append(ctx.get(dut.o_tx))

    _run(dut, tx.run, watch)
    assert decode_8n1(line, divisor) == data
    start = line.index(0)
    last_low = max(i for i, v in enumerate(line) if v == 0)
    # the last byte (0x3B: bit 7 low) ends with its stop bit after 10 bit times
    assert line[start + len(data) * 10 * divisor - 1] == 1
    assert last_low < start + len(data) * 10 * divisor


@pytest.mark.parametrize("bad", [0, 1, -3, 2.5, True])
def test_uart_tx_bad_divisor(bad):
    with pytest.raises(ValueError, match="divisor") as exc:
        UartTx(bad)
    disown_failed(exc.value)


def _expect(fields, values):
    return " ".join(f"{n}={v:0{(w + 3) // 4}X}" for (n, w), v in zip(fields, values)) + "\r\n"


def test_hex_report_prints_a_snapshot():
    """Two lines: the first shows the values at its start even though the inputs change
    in its middle; the second shows the new values."""
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    fields = [("t", 32), ("a1", 1), ("bb", 7), ("c_x", 16), ("d", 40), ("e", 4)]
    first = [rng.randrange(1 << w) for _, w in fields]
    second = [rng.randrange(1 << w) for _, w in fields]
    line1, line2 = _expect(fields, first), _expect(fields, second)
    period = 20          # shorter than a line: the next starts as soon as one ends
    dut = HexReport(fields, period)
    rx = StreamReceiver(dut.o_data, len(line1) + len(line2), seed=seed, backpressure=0.3,
                        max_cycles=5000)

    async def drive(ctx):
        for (n, _), v in zip(fields, first):
            ctx.set(getattr(dut, f"i_{n}"), v)
        while len(rx.received) < 5:
            await ctx.tick()
        for (n, _), v in zip(fields, second):
            ctx.set(getattr(dut, f"i_{n}"), v)

    _run(dut, drive, rx.run)
    text = bytes(rx.received).decode("ascii")
    assert text == line1 + line2, f"seed {seed}"
    assert re.fullmatch(r"(t=[0-9A-F]{8} a1=[01] bb=[0-9A-F]{2} c_x=[0-9A-F]{4} "
                        r"d=[0-9A-F]{10} e=[0-9A-F]\r\n){2}", text)


def test_hex_report_period():
    """With the sink always ready, lines start exactly ``period`` cycles apart."""
    fields = [("x", 8)]
    period = 50
    dut = HexReport(fields, period)
    rx = StreamReceiver(dut.o_data, 3 * len("x=00\r\n"), max_cycles=400)

    async def drive(ctx):
        ctx.set(dut.i_x, 0xA5)

    _run(dut, drive, rx.run)
    assert bytes(rx.received) == b"x=A5\r\n" * 3
    starts = rx.cycles[0::6]
    assert [b - a for a, b in zip(starts, starts[1:])] == [period, period]


@pytest.mark.parametrize("fields,period,match", [
    ([], 10, "fields"), ([("1a", 4)], 10, "name"), ([("a b", 4)], 10, "name"),
    ([("a", 0)], 10, "width"), ([("a", 4), ("a", 8)], 10, "repeat"),
    ([("a", 4)], 0, "period")])
def test_hex_report_bad_parameters(fields, period, match):
    with pytest.raises(ValueError, match=match) as exc:
        HexReport(fields, period)
    disown_failed(exc.value)
