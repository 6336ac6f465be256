"""Shared stimulus for the PCS tests: model transmit → lane channel → receiver, and an
Amaranth-simulator run of ``pcs-rx`` compared with :class:`fusionfabric.sim.pcs.Receiver` every cycle.

No cocotb here (the cocotb testbench imports the stimulus helpers too).
"""

from __future__ import annotations

import numpy as np

from fusionfabric.sim import pcs
from fusionfabric.tb.common.lanes import LaneChannel

__all__ = ["tx_lane_rows", "rx_status", "compare_rx_amaranth", "channel_inputs",
           "compare_tx_amaranth", "word_rows"]


def tx_lane_rows(rng: np.random.Generator, n_lanes: int, am_period: int, n_rows: int,
                 p_ctrl: float = 0.2, p_idle: float = 0.1):
    """Random client rows (some left idle) and the transmitted lane rows, per cycle.

    Returns ``(words, rows)``: ``words`` the non-idle client words in order (what a
    receiver should deliver), ``rows[t]`` the list of ``n_lanes`` 66-bit blocks sent at
    output row ``t``.
    """
    data, ctrl = pcs.random_rows(rng, n_rows, n_lanes, p_ctrl)
    idle_rows = rng.random(n_rows) < p_idle
    idle_d, idle_c = pcs.idle_row(n_lanes)
    d = data.reshape(n_rows, n_lanes).copy()
    c = ctrl.reshape(n_rows, n_lanes).copy()
    d[idle_rows] = idle_d
    c[idle_rows] = idle_c
    tx = pcs.transmit(d.reshape(-1), c.reshape(-1), n_lanes, am_period)
    blocks = [tx.blocks(k) for k in range(n_lanes)]
    rows = [[blocks[k][r] for k in range(n_lanes)] for r in range(len(blocks[0]))]
    words = [(int(x), int(y)) for x, y in zip(d.reshape(-1), c.reshape(-1))]
    return words, rows


def word_rows(rows, serdes_width: int):
    """Per-cycle block rows (``rows[t][lane]``) as per-cycle rows of W-bit words, each lane
    serialized on its own (:func:`fusionfabric.sim.pcs.serialize`); ``rows`` itself for W = 66."""
    if serdes_width == 66:
        return [list(r) for r in rows]
    lanes = [pcs.serialize([r[k] for r in rows], serdes_width) for k in range(len(rows[0]))]
    return [list(w) for w in zip(*lanes)]


def rx_status(model: pcs.Receiver) -> dict:
    """The model registers that ``pcs-rx`` exposes as ports."""
    return {
        "block_lock": list(model.lock), "am_lock": list(model.am_lock),
        "hi_ber": list(model.hi_ber), "lane_id": list(model.am_id),
        "bip_errors": list(model.bip_errors), "slips": list(model.slips),
        "link_up": model.link_up, "decode_errors": model.decode_errors,
        "align_failures": model.align_failures, "valid": model.out_valid,
        "words": list(model.out_words) if model.out_valid else None,
    }


def compare_rx_amaranth(dut, model: pcs.Receiver, inputs, on_cycle=None) -> list:
    """Run ``dut`` (a ``PcsRx``) in the Amaranth simulator on ``inputs`` (cycles x lanes)
    and assert its ports equal the model's registers after every clock edge. Returns the
    model's per-cycle status list."""
    from amaranth.sim import Simulator

    n = dut.n_lanes
    trace = []

    def bits(v, width):
        return [(v >> i) & 1 for i in range(width)]

    async def bench(ctx):
        for t, row in enumerate(inputs):
            for p in range(n):
                ctx.set(dut.i_lanes[p], int(row[p]))
            await ctx.tick()
            model.step(row)
            want = rx_status(model)
            got = {
                "block_lock": bits(ctx.get(dut.o_block_lock), n),
                "am_lock": bits(ctx.get(dut.o_am_lock), n),
                "hi_ber": bits(ctx.get(dut.o_hi_ber), n),
                "lane_id": [ctx.get(dut.o_lane_id[p]) for p in range(n)],
                "bip_errors": [ctx.get(dut.o_bip_errors[p]) for p in range(n)],
                "slips": [ctx.get(dut.o_slips[p]) for p in range(n)],
                "link_up": ctx.get(dut.o_link_up),
                "decode_errors": ctx.get(dut.o_decode_errors),
                "align_failures": ctx.get(dut.o_align_failures),
                "valid": ctx.get(dut.o_data.valid),
            }
            got["words"] = ([(ctx.get(dut.o_data.payload[j].data),
                              ctx.get(dut.o_data.payload[j].ctrl)) for j in range(n)]
                            if got["valid"] else None)
            for key in want:
                if key in ("lane_id",) and not any(want["am_lock"]):
                    continue
                assert got[key] == want[key], f"cycle {t}: {key}: rtl {got[key]} model {want[key]}"
            trace.append(want)
            if on_cycle:
                on_cycle(t)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return trace


def channel_inputs(rng, rows, channel: LaneChannel, events=None):
    """Push ``rows`` through ``channel``; ``events[t]`` (a callable) runs before row t."""
    out = []
    for t, row in enumerate(rows):
        if events and t in events:
            events[t](channel)
        out.append(channel.push(row))
    return out


def compare_tx_amaranth(dut, rng, n_cycles: int, p_valid: float = 0.8):
    """Drive ``dut`` (a ``PcsTx``) for ``n_cycles`` cycles with random rows through
    :class:`fusionfabric.tb.common.amaranth_stream.StreamSender` (an idle cycle before each
    row with probability ``1 - p_valid``), record the rows it accepted (or IDLE rows it had
    to send in a cycle with ready high and valid low), and assert ``o_lanes`` equals
    :func:`fusionfabric.sim.pcs.transmit` of those rows, block for block (W = 66) or word for word of
    :func:`fusionfabric.sim.pcs.serialize` (W = 32/64), and that ``i_data.ready`` is only high in the
    gearbox's row cycles (:func:`fusionfabric.sim.pcs.tx_takes`). ``rng`` is a seed or a numpy
    Generator (rows and idle cycles are drawn from it). Returns the number of output words
    compared per lane."""
    from amaranth.sim import Simulator

    from fusionfabric.formats.pcs import WORD
    from fusionfabric.tb.common.amaranth_stream import StreamSender, make_rng

    rng, seed = make_rng(rng)
    n, P, W = dut.n_lanes, dut.am_period, dut.serdes_width
    sent_d, sent_c, got, readys = [], [], [], []
    idle_d, idle_c = pcs.idle_row(n)
    rows = []
    for _ in range(n_cycles):
        data, ctrl = pcs.random_rows(rng, 1, n)
        rows.append((data, ctrl))

    def flat(row):
        return sum(WORD.pack(data=int(d), ctrl=int(c)) << (k * WORD.width)
                   for k, (d, c) in enumerate(zip(*row)))

    def on_cycle(ctx, valid, ready):
        readys.append(ready)
        if ready and not valid:
            sent_d.extend(idle_d)
            sent_c.extend(idle_c)
        got.append([ctx.get(dut.o_lanes[k]) for k in range(n)])

    def on_beat(ctx, word):
        data, ctrl = rows[len(sender.sent) - 1]
        sent_d.extend(int(x) for x in data)
        sent_c.extend(int(x) for x in ctrl)

    sender = StreamSender(dut.i_data, [flat(r) for r in rows], seed=rng, idle=1.0 - p_valid,
                          on_cycle=on_cycle, on_beat=on_beat, stop_after=n_cycles)
    sender.seed = seed
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(sender.run)
    sim.run()
    assert sender.cycles == len(got) == n_cycles, (sender.cycles, len(got), f"seed {seed}")
    tx = pcs.transmit(sent_d, sent_c, n, P)
    blocks = [tx.blocks(k) for k in range(n)]
    takes = pcs.tx_takes(W, n_cycles)
    assert not any(r and not t for r, t in zip(readys, takes)), "ready outside a row cycle"
    # every row cycle sent a row: the model's rows (markers included) are the take cycles,
    # except a marker row the RTL may have sent after the last data row (W < 66: the row
    # register holds one more row, so the model may have one row more)
    slack = 0 if W == 66 else -1
    assert slack <= int(takes.sum()) - len(blocks[0]) <= 1, (int(takes.sum()), len(blocks[0]))
    if W == 66 and len(got) > len(blocks[0]):
        assert all(pcs.marker_id(b) == k for k, b in enumerate(got[-1]))
    words = [pcs.serialize(blocks[k], W) for k in range(n)]
    got = got[:len(words[0])]
    # the model may hold up to two rows more than the line has sent (gearbox + row register)
    assert len(got) >= len(words[0]) - (132 + W) // W - 1
    for r, row in enumerate(got):
        for k in range(n):
            assert row[k] == words[k][r], \
                f"W={W} word {r} lane {k}: rtl {row[k]:017x} model {words[k][r]:017x}"
    return len(got)
