"""cocotb tests of pcs-tx → lane channel → pcs-rx (the :class:`fusionfabric.tb.pcs.loopback.PcsLoopback`
harness), compared with the golden model every cycle.

Each cycle the testbench (1) drives the receiver's lanes at the falling edge, (2) after
ReadOnly steps :class:`fusionfabric.sim.pcs.Receiver` with the lanes the receiver sampled at the last
rising edge and compares every status port and the delivered row with it, (3) records what
the transmitter accepted and sent, (4) pushes the transmitter's lanes through the
:class:`fusionfabric.tb.common.lanes.LaneChannel` (faults scheduled per cycle) for the next cycle. At the
end the transmitter's lanes are checked block for block against :func:`fusionfabric.sim.pcs.transmit`
of the rows it accepted, and the delivered rows against the sent rows (contiguous runs).

With ``serdes_width`` W = 32/64 the lanes carry W-bit words (the gearboxes of both ends
are in the loop) and every time in blocks becomes ``66/W`` times as many cycles
(:meth:`PcsTb.cyc`).

Test arguments (``test_args``): ``cycles`` (base length), ``ber`` (bit error rate of the
error test), ``idle`` (source idle probability), ``slips`` (slips of the slip test),
``sweep`` (slip amounts of ``test_slip_sweep``, default 1..65).
"""

from __future__ import annotations

import math

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from fusionfabric.formats.pcs import WORD
from fusionfabric.sim import pcs
from fusionfabric.tb.common.coverage import cover_point, export_coverage
from fusionfabric.tb.common.env import make_rng
from fusionfabric.tb.common.lanes import LaneChannel
from fusionfabric.tb.common.stream import StreamSource, to_int
from fusionfabric.tb.common.tb import TB
from fusionfabric.tb.pcs.harness import rx_status

IDLE_WORD = (pcs.control_word(pcs.BlockType.IDLE), 1)
TYPE_NAMES = {int(t): t.name for t in pcs.BlockType}

sample_block_type = cover_point(
    "pcs.block_type", bins=["DATA", "IDLE", "START", "MESSAGE", "ERROR", "MARKER"])
sample_lock_event = cover_point("pcs.lock_fsm_transition", bins=list(pcs.LOCK_EVENTS))
sample_slip = cover_point("pcs.slip_bits", bins=list(range(1, 66)))
sample_skew = cover_point("pcs.skew_blocks", bins=list(range(0, 17)))
sample_am_first = cover_point("pcs.am_lock_first_lane", bins=list(range(8)))
sample_am_last = cover_point("pcs.am_lock_last_lane", bins=list(range(8)))


class PcsTb(TB):
    def __init__(self, dut):
        super().__init__(dut, stall_cycles=20_000)
        p = self.params
        self.n = int(p["n_lanes"])
        self.P = int(p["am_period"])
        self.S = int(p["max_skew"])
        self.W = int(p["ber_window"])
        self.width = int(p.get("serdes_width", 66))
        self.src = StreamSource(dut, "i_data", self.clk, self.rng,
                                idle=float(self.args.get("idle", 0.2)), watchdog=self.watchdog)
        # slack (words) so that a slip may delete up to 2 blocks' worth of pending bits
        self.slack = math.ceil(132 / self.width)
        self.channel = LaneChannel(self.n, self.width, make_rng(1), slack=self.slack)
        self.model = pcs.make_receiver(self.n, self.P, self.S, self.W, self.width)
        self.events: dict[int, list] = {}
        self.cycle = 0
        self.sent_rows: list[tuple] = []     # rows the transmitter accepted (or idled)
        self.tx_out: list[list[int]] = []    # transmitter lanes, per cycle
        self.delivered: list[tuple | None] = []   # per cycle: delivered row or None
        self.trace: list[dict] = []
        self.words_sent = 0
        self.am_seen = False
        self.rx_lanes = [getattr(dut, f"i_lanes__{k}") for k in range(self.n)]
        self.tx_lanes = [getattr(dut, f"o_lanes__{k}") for k in range(self.n)]
        self.ids = [getattr(dut, f"o_lane_id__{k}") for k in range(self.n)]
        self.bips = [getattr(dut, f"o_bip_errors__{k}") for k in range(self.n)]
        self.slips = [getattr(dut, f"o_slips__{k}") for k in range(self.n)]

    def cyc(self, blocks: float) -> int:
        """Cycles that carry ``blocks`` blocks per lane (``blocks`` for W = 66)."""
        return math.ceil(blocks * 66 / self.width)

    def core_steps(self) -> int:
        """Blocks the receiver's 66-bit part has processed (its cycles)."""
        return getattr(self.model, "core", self.model).cycle

    def at(self, cycle: int, fn) -> None:
        """Run ``fn(channel)`` just before the transmitter's row of ``cycle`` enters it."""
        self.events.setdefault(cycle, []).append(fn)

    async def start(self):
        """Reset at falling edges, then run the per-cycle loop."""
        await FallingEdge(self.clk)
        self.rst.value = 1
        for lane in self.rx_lanes:
            lane.value = 0
        for _ in range(4):
            await FallingEdge(self.clk)
        self.rst.value = 0
        self.start_watchdog()
        # the first rising edge after reset may already take a row (W < 66: the row register
        # holds the first marker row, so the encoder's first row is a data row)
        await ReadOnly()
        self._record_tx()
        cocotb.start_soon(self._loop())

    def _record_tx(self) -> None:
        """Record the row the transmitter takes at the next rising edge (in ReadOnly)."""
        if to_int(self.dut.i_data__ready.value):
            if to_int(self.dut.i_data__valid.value):
                v = to_int(self.dut.i_data__payload.value)
                ws = [WORD.unpack((v >> (65 * j)) & ((1 << 65) - 1))
                      for j in range(self.n)]
                self.sent_rows.append(tuple((w["data"], w["ctrl"]) for w in ws))
            else:
                self.sent_rows.append(tuple([IDLE_WORD] * self.n))

    def _bits(self, handle) -> list[int]:
        v = to_int(handle.value)
        return [(v >> i) & 1 for i in range(self.n)]

    def _status(self) -> dict:
        d = self.dut
        got = {
            "block_lock": self._bits(d.o_block_lock), "am_lock": self._bits(d.o_am_lock),
            "hi_ber": self._bits(d.o_hi_ber), "lane_id": [to_int(h.value) for h in self.ids],
            "bip_errors": [to_int(h.value) for h in self.bips],
            "slips": [to_int(h.value) for h in self.slips],
            "link_up": to_int(d.o_link_up.value),
            "decode_errors": to_int(d.o_decode_errors.value),
            "align_failures": to_int(d.o_align_failures.value),
            "valid": to_int(d.o_data__valid.value),
        }
        got["words"] = None
        if got["valid"]:
            v = to_int(d.o_data__payload.value)
            got["words"] = [WORD.unpack((v >> (65 * j)) & ((1 << 65) - 1))
                            for j in range(self.n)]
            got["words"] = [(w["data"], w["ctrl"]) for w in got["words"]]
        return got

    async def _loop(self):
        # start() released reset at a falling edge; the rising edge before this loop's first
        # falling edge already clocked the receiver with all-zero lanes
        rx_in = [0] * self.n
        prev_in = [0] * self.n
        while True:
            await FallingEdge(self.clk)
            for h, v in zip(self.rx_lanes, rx_in):
                h.value = v
            await ReadOnly()
            if prev_in is not None:
                am_before = list(self.model.am_lock)
                self.model.step(prev_in)
                want = rx_status(self.model)
                got = self._status()
                for key, value in want.items():
                    if key == "lane_id" and not any(want["am_lock"]):
                        continue
                    assert got[key] == value, (
                        f"cycle {self.cycle}: {key}: rtl {got[key]} model {value} "
                        f"(seed {self.seed})")
                self.trace.append(want)
                self.delivered.append(tuple(want["words"]) if want["valid"] else None)
                for e in self.model.lock_event:
                    sample_lock_event(e)
                if want["valid"]:
                    for d, c in want["words"]:
                        sample_block_type(TYPE_NAMES.get(d & 0xFF, "ERROR") if c else "DATA")
                    self.watchdog.kick("rx row")
                newly = [p for p in range(self.n) if want["am_lock"][p] and not am_before[p]]
                if newly and not any(am_before):
                    sample_am_first(newly[0])
                if newly and all(want["am_lock"]):
                    sample_am_last(newly[-1])
            prev_in = list(rx_in)
            # transmitter side
            tx_row = [to_int(h.value) for h in self.tx_lanes]
            self.tx_out.append(tx_row)
            if all(pcs.marker_id(b) == k for k, b in enumerate(tx_row)):
                sample_block_type("MARKER")
            self._record_tx()
            for fn in self.events.pop(self.cycle, []):
                fn(self.channel)
            rx_in = self.channel.push(tx_row)
            self.cycle += 1

    def send_rows(self, n_rows: int, p_ctrl: float = 0.25) -> None:
        data, ctrl = pcs.random_rows(self.rng, n_rows, self.n, p_ctrl)
        for r in range(n_rows):
            beat = 0
            for k in range(self.n):
                i = r * self.n + k
                beat |= WORD.pack(data=int(data[i]), ctrl=int(ctrl[i])) << (65 * k)
            self.src.send(beat)

    async def run_until(self, cycle: int) -> None:
        while self.cycle < cycle:
            await FallingEdge(self.clk)

    # -- end-of-test checks ----------------------------------------------------------------
    def check_tx(self) -> None:
        """The transmitter's lanes, word for word, against :func:`fusionfabric.sim.pcs.transmit` of the
        rows it accepted, serialized to W bits (:func:`fusionfabric.sim.pcs.serialize`)."""
        d = [w for row in self.sent_rows for w, _ in row]
        c = [c for row in self.sent_rows for _, c in row]
        tx = pcs.transmit(d, c, self.n, self.P)
        words = [pcs.serialize(tx.blocks(k), self.width) for k in range(self.n)]
        # the row accepted in the last cycle is not (wholly) on the lanes yet
        rows = min(len(words[0]), len(self.tx_out))
        # (up to two rows at W < 66: the gearbox's and the row register's)
        slack = 2 if self.width == 66 else (132 + self.width) // self.width + 1
        assert len(self.tx_out) >= len(words[0]) - slack, (len(self.tx_out), len(words[0]))
        assert rows * self.width > len(self.sent_rows) * 66 // 2
        for r in range(rows):
            for k in range(self.n):
                assert self.tx_out[r][k] == words[k][r], (
                    f"tx word {r} lane {k}: rtl {self.tx_out[r][k]:017x} model "
                    f"{words[k][r]:017x} (W={self.width}, seed {self.seed})")

    def check_runs(self, allow_errors_in=()) -> int:
        """Delivered rows form runs of consecutive sent rows. A run may only restart (jump)
        after the link went down or after a fault window in ``allow_errors_in`` (cycle
        ranges after a fault and before the lane loses lock, where rows are not checked:
        misaligned blocks with valid headers, or a neighbour's descrambler history, deliver
        garbage; see docs/pcs.md). Returns the number of rows checked."""
        idx = {}
        for i, row in enumerate(self.sent_rows):
            if any(w != IDLE_WORD for w in row):
                idx.setdefault(row, i)
        checked, expect, may_jump = 0, None, True
        for t, row in enumerate(self.delivered):
            if not self.trace[t]["link_up"]:
                may_jump = True
            if row is None:
                continue
            if any(a <= t < b for a, b in allow_errors_in):
                expect, may_jump = None, True
                continue
            if expect is not None and expect < len(self.sent_rows) and \
                    self.sent_rows[expect] == row:
                expect += 1
                checked += 1
                continue
            if expect is None and all(w == IDLE_WORD for w in row):
                continue   # an idle row cannot be placed; wait for a data row
            assert may_jump, (f"cycle {t}: row out of sequence without a link drop: {row} "
                              f"(seed {self.seed})")
            assert row in idx, f"cycle {t}: delivered row never sent: {row} (seed {self.seed})"
            expect, may_jump = idx[row] + 1, False
            checked += 1
        return checked

    def check_rate(self) -> None:
        """After the link is up for good, the receiver delivers a row in every cycle that
        carries a whole data row: ``width / 66`` rows per cycle less one marker row in
        ``am_period``. The rows delivered from then on (each checked by :meth:`check_runs`)
        must be at least 90 % of that, less the pipeline, and the link must be up at the
        end. The time to link-up depends on the bit offsets and skews drawn (block lock
        hunts through up to 65 slips), so it is not bounded here: the model, compared
        cycle by cycle, fixes it."""
        up = self.link_up_cycles()
        assert up[-1] == 1, f"link down at the end (seed {self.seed})"
        down = np.flatnonzero(up == 0)
        t_up = int(down[-1]) + 1 if down.size else 0      # the last link-up
        after = sum(1 for t in range(t_up, len(self.delivered))
                    if self.delivered[t] is not None)
        capacity = (len(up) - t_up) * self.width / 66 * (self.P - 1) / self.P
        pipeline = self.cyc(8 + self.S)
        print(f"link up at cycle {t_up} of {len(up)}: {after} rows delivered after it, "
              f"capacity {capacity:.0f} (seed {self.seed})")
        assert after >= 0.9 * capacity - pipeline, (
            f"{after} rows delivered in the {len(up) - t_up} cycles after link-up at cycle "
            f"{t_up}; capacity {capacity:.0f} (seed {self.seed})")

    def link_up_cycles(self) -> np.ndarray:
        return np.array([t["link_up"] for t in self.trace])


def _max_skew_words(tb: PcsTb) -> int:
    """Largest whole-word channel skew always absorbed: ``(max_skew - 1)`` blocks' worth of
    bits (a bit offset may add one block)."""
    return max(0, tb.S - 1) * 66 // tb.width


def _skew_and_offsets(tb: PcsTb, rng) -> list[int]:
    """Random whole-word skew (up to max_skew-1 blocks' worth: a bit offset may add one
    block) and bit offset per lane, a random permutation; returns the skews in blocks."""
    skews = [int(rng.integers(0, _max_skew_words(tb) + 1)) for _ in range(tb.n)]
    for k, s in enumerate(skews):
        tb.channel.skew(k, s)
        tb.channel.slip(k, int(rng.integers(1, 66)))
    tb.channel.permute(list(rng.permutation(tb.n)))
    return [s * tb.width // 66 for s in skews]


@cocotb.test()
async def test_loopback(dut):
    """Random data and control words, idle gaps, skew, bit offsets, permutation."""
    tb = PcsTb(dut)
    cycles = tb.cyc(int(tb.args.get("cycles", 250)) + 8 * tb.P)
    rng = make_rng(2)
    skews = _skew_and_offsets(tb, rng)
    for s in skews:
        sample_skew(s)
    tb.send_rows(cycles)
    await tb.start()
    await tb.run_until(cycles)
    tb.check_tx()
    tb.check_runs()
    tb.check_rate()
    assert tb.trace[-1]["decode_errors"] == 0
    assert tb.trace[-1]["bip_errors"] == [0] * tb.n
    export_coverage()


@cocotb.test()
async def test_skew_max(dut):
    """Every lane skewed, one of them by max_skew - 1 words plus a bit offset (the most
    the receiver can take: max_skew cycles), the rest at random; reversed lane order."""
    tb = PcsTb(dut)
    cycles = tb.cyc(int(tb.args.get("cycles", 250)) + 8 * tb.P)
    rng = make_rng(3)
    far = int(rng.integers(0, tb.n))
    top = _max_skew_words(tb)
    for k in range(tb.n):
        s = top if k == far else int(rng.integers(0, top + 1))
        tb.channel.skew(k, s)
        sample_skew(s * tb.width // 66 + (1 if tb.S else 0))
        if tb.S:
            tb.channel.slip(k, int(rng.integers(1, 66)))
    tb.channel.permute(list(range(tb.n))[::-1])
    tb.send_rows(cycles)
    await tb.start()
    await tb.run_until(cycles)
    tb.check_tx()
    tb.check_runs()
    tb.check_rate()
    export_coverage()


def _check_slips(tb, plan) -> list[tuple[int, int]]:
    """Check the relock after every ``(at, lane, k)`` slip of ``plan``; return the cycle
    windows in which the receiver may deliver errors (slip to relock plus the pipeline)."""
    windows = []
    perm = tb.channel.perm
    for at, lane, k in plan:
        out_lane = perm.index(lane)
        lock = np.array([t["block_lock"][out_lane] for t in tb.trace])
        # the slipped bits reach the receiver 2 cycles later (slack) at most
        _check_relock(tb, lock, at, k, out_lane)
        lost = at + int(np.argmax(lock[at:] == 0))
        windows.append((at, lost + tb.cyc(8 + tb.S)))
    return windows


def _check_relock(tb: PcsTb, lock, at: int, k: int, lane: int) -> None:
    """A slip of ``k`` bits at cycle ``at`` on output lane ``lane``: locked before, lock
    lost within 128 blocks (16 invalid headers in a window of 64), regained within
    64 + 4*66 blocks after that (plus the channel slack and gearbox cycles)."""
    assert lock[at - 1] == 1, f"lane {lane} not locked before the slip at {at}"
    lost = at + int(np.argmax(lock[at:] == 0))
    assert lock[lost] == 0 and lost - at <= tb.cyc(128) + tb.slack + 4, \
        f"slip {k} at {at}: lock kept (seed {tb.seed})"
    back = lost + int(np.argmax(lock[lost:] == 1))
    assert lock[back] == 1 and back - lost <= tb.cyc(64 + 4 * 66) + 2, \
        f"slip {k} at {at}: relock took {back - lost} cycles (seed {tb.seed})"


@cocotb.test()
async def test_slip_relock(dut):
    """Bit slips of k bits on locked lanes: lock lost within 128 blocks, regained within
    64 + 4*66 blocks after that, link back up, correct data after (needs max_skew >= 3
    with several lanes)."""
    tb = PcsTb(dut)
    rng = make_rng(4)
    # no initial skew here: each slip moves a lane by up to 65 bits, and the sign is chosen
    # to keep every lane within 65 bits of where it started, so the lanes stay within
    # 130 bits (3 cycles with the sub-block rounding) of each other: max_skew >= 3 is enough
    tb.channel.permute(list(rng.permutation(tb.n)))
    net = [0] * tb.n
    settle = tb.cyc(300 + 4 * tb.P)
    n_slips = int(tb.args.get("slips", 2))
    gap = tb.cyc(450 + 4 * tb.P)
    plan = []
    for i in range(n_slips):
        lane = int(rng.integers(0, tb.n))
        k = int(rng.integers(1, 66)) * (-1 if net[lane] > 0 or i == 0 else 1)
        net[lane] += k
        at = settle + i * gap
        plan.append((at, lane, k))
        tb.at(at, lambda ch, lane=lane, k=k: ch.slip(lane, k))
        sample_slip(abs(k))
    cycles = settle + n_slips * gap
    tb.send_rows(cycles)
    await tb.start()
    await tb.run_until(cycles)
    tb.check_tx()
    windows = _check_slips(tb, plan)
    assert tb.trace[-1]["link_up"] == 1
    tb.check_runs(allow_errors_in=windows)
    export_coverage()


@cocotb.test()
async def test_bit_errors_bip(dut):
    """Random bit errors: the BIP counters equal the model's, and an independent prediction
    from the channel's flip log (Table 82-4 mapping) for the markers checked."""
    tb = PcsTb(dut)
    start = tb.cyc(300 + 3 * tb.P)
    blocks = int(tb.args.get("cycles", 250)) * 2 + 6 * tb.P
    cycles = start + tb.cyc(blocks)
    # at least ~20 flips expected over all lanes, so that the check below is never vacuous
    ber = max(float(tb.args.get("ber", 1e-4)), 20 / (tb.n * blocks * 66))
    tb.at(start, lambda ch: ch.set_ber(ber))
    tb.send_rows(cycles)
    await tb.start()
    await tb.run_until(cycles)
    tb.check_tx()
    final = tb.trace[-1]
    assert all(final["am_lock"]), "marker lock lost at this error rate"
    # markers the receiver has checked: the lane's marker rows up to the row that reached
    # the marker-lock stage (channel slack + block register 1 + 1, in blocks)
    last_row = tb.core_steps() - math.ceil(tb.slack * tb.width / 66) - 3
    for k in range(tb.n):
        per_marker: dict[int, int] = {}
        for lane, b in tb.channel.flips:
            if lane != k:
                continue
            r, bit = divmod(b, 66)
            bip_bit = 3 if bit == 0 else 4 if bit == 1 else (bit - 2) % 8
            if r % tb.P == 0 and 26 <= bit < 34:
                per_marker[r] = per_marker.get(r, 0) ^ (1 << (bit - 26))
            m = (r // tb.P + 1) * tb.P
            per_marker[m] = per_marker.get(m, 0) ^ (1 << bip_bit)
        predicted = sum(1 for m, v in per_marker.items() if v and m <= last_row - 10)
        near = sum(1 for m, v in per_marker.items() if v and last_row - 10 < m <= last_row + 2)
        assert predicted <= final["bip_errors"][k] <= predicted + near, (
            f"lane {k}: BIP errors {final['bip_errors'][k]}, predicted {predicted} "
            f"(+{near} at the edge; seed {tb.seed})")
    assert len(tb.channel.flips) > 0
    export_coverage()


@cocotb.test()
async def test_header_burst(dut):
    """Four bursts of 8 bad headers 64 blocks apart: lock kept (at most 9 bad in any window
    of 64), hi_ber raised (two whole bursts share one BER window when it is >= 400 blocks);
    then a burst of 40: lock lost, regained, link back up without reset."""
    tb = PcsTb(dut)
    lane = int(make_rng(5).integers(0, tb.n))
    c = tb.cyc
    t0 = c(300 + 3 * tb.P)
    for i in range(4):
        t = t0 + c(64 * i)
        tb.at(t, lambda ch: ch.hold(lane, 0))
        tb.at(t + c(8) - (tb.width != 66), lambda ch: ch.hold(lane, None))
    t1 = t0 + c(300)
    tb.at(t1, lambda ch: ch.hold(lane, 0))
    tb.at(t1 + c(40), lambda ch: ch.hold(lane, None))
    cycles = t1 + c(450 + 4 * tb.P)
    tb.send_rows(cycles)
    await tb.start()
    await tb.run_until(cycles)
    tb.check_tx()
    lock = np.array([t["block_lock"][lane] for t in tb.trace])
    hi = np.array([t["hi_ber"][lane] for t in tb.trace])
    assert lock[t0 - 1] == 1 and all(lock[t0:t0 + c(280)] == 1), \
        "lock lost by 8-header bursts"
    if tb.W >= 400:
        assert hi[t0:t0 + c(300)].any(), "hi_ber not raised by 4 x 8 bad headers"
    assert (lock[t1:t1 + c(42)] == 0).any(), "lock kept through 40 bad headers"
    assert tb.trace[-1]["link_up"] == 1 and lock[-1] == 1
    tb.check_runs(allow_errors_in=[(t0, t0 + c(280)), (t1, t1 + c(60 + tb.S))])
    export_coverage()


@cocotb.test()
async def test_lane_stuck(dut):
    """One lane held constant from the start: that lane never locks, the link stays down,
    nothing is delivered. Released: the link comes up."""
    tb = PcsTb(dut)
    lane = int(make_rng(6).integers(0, tb.n))
    value = [0, (1 << tb.width) - 1][int(make_rng(7).integers(0, 2))]
    tb.channel.hold(lane, value)
    release = tb.cyc(200 + 2 * tb.P)
    tb.at(release, lambda ch: ch.hold(lane, None))
    cycles = release + tb.cyc(350 + 4 * tb.P)
    tb.send_rows(cycles)
    await tb.start()
    await tb.run_until(cycles)
    assert all(t["block_lock"][lane] == 0 for t in tb.trace[:release])
    assert all(t["link_up"] == 0 and not t["valid"] for t in tb.trace[:release])
    assert tb.trace[-1]["link_up"] == 1
    tb.check_runs()
    export_coverage()


@cocotb.test()
async def test_slip_sweep(dut):
    """Every slip amount in turn (``sweep``, default 1..65 bits), on a rotating lane, the
    sign chosen to keep every lane within 65 bits of its start; each slip waits until the
    lane has relocked and the link is up again (bounds of :func:`_check_relock`). Covers
    every bin of ``pcs.slip_bits`` in one short run (use a small ``am_period``)."""
    tb = PcsTb(dut)
    amounts = [int(x) for x in str(tb.args.get("sweep", "1-65")).split("-")]
    amounts = list(range(amounts[0], amounts[-1] + 1))
    rng = make_rng(8)
    tb.channel.permute(list(rng.permutation(tb.n)))
    net = [0] * tb.n
    budget = len(amounts) * tb.cyc(700 + 4 * tb.P) + tb.cyc(400 + 4 * tb.P)
    tb.send_rows(budget)
    await tb.start()
    plan = []
    for i, k in enumerate(amounts):
        # wait for the link to be up and steady (a whole marker period)
        while True:
            await tb.run_until(tb.cycle + 8)
            up = tb.link_up_cycles()
            steady = tb.cyc(tb.P + 8)
            if len(up) > steady and up[-steady:].all():
                break
            assert tb.cycle < budget, f"link not back before slip {k} (seed {tb.seed})"
        lane = i % tb.n
        k_signed = -k if net[lane] > 0 else k
        net[lane] += k_signed
        at = tb.cycle + 2
        tb.at(at, lambda ch, lane=lane, k=k_signed: ch.slip(lane, k))
        plan.append((at, lane, k_signed))
        sample_slip(k)
    await tb.run_until(tb.cycle + tb.cyc(400 + 4 * tb.P))
    windows = _check_slips(tb, plan)
    assert tb.trace[-1]["link_up"] == 1
    tb.check_tx()
    tb.check_runs(allow_errors_in=windows)
    export_coverage()


@cocotb.test()
async def test_am_lock_order(dut):
    """Every physical lane once as the first to gain marker lock (winner) and once as the
    last (loser): all lanes held at zero until block lock is lost, lane ``L`` released
    alone until it is marker-locked, then the others except lane ``L + 1``, which is
    released last. The first/last marker-locked lanes are checked (and covered)."""
    tb = PcsTb(dut)
    n = tb.n
    rng = make_rng(9)
    tb.channel.permute(list(rng.permutation(n)))
    budget = n * tb.cyc(1500 + 8 * tb.P) + tb.cyc(400 + 4 * tb.P)
    tb.send_rows(budget)
    await tb.start()

    async def wait_for(cond, what):
        while not cond(tb.trace[-1] if tb.trace else None):
            await tb.run_until(tb.cycle + 1)
            assert tb.cycle < budget, f"timeout waiting for {what} (seed {tb.seed})"

    windows = []
    for first in range(n):
        last = (first + 1) % n
        await wait_for(lambda t: t and t["link_up"], "link up")
        t0 = tb.cycle
        for p in range(n):
            tb.at(tb.cycle + 1, lambda ch, p=p: ch.hold(p, 0))
        await wait_for(lambda t: t and not any(t["block_lock"]) and not any(t["am_lock"]),
                       "all lanes unlocked")
        windows.append((t0, tb.cycle + tb.cyc(8 + tb.S)))
        tb.at(tb.cycle + 1, lambda ch: ch.hold(first, None))
        mark = len(tb.trace)
        await wait_for(lambda t: t and t["am_lock"][first], f"lane {first} marker lock")
        if n > 1:
            for p in range(n):
                if p not in (first, last):
                    tb.at(tb.cycle + 1, lambda ch, p=p: ch.hold(p, None))
            await wait_for(lambda t: t and all(t["am_lock"][p] for p in range(n) if p != last),
                           "the other lanes' marker lock")
            tb.at(tb.cycle + 1, lambda ch: ch.hold(last, None))
        await wait_for(lambda t: t and all(t["am_lock"]), "all lanes marker-locked")
        order = []
        for t in tb.trace[mark - 1:]:
            order += [p for p in range(n) if t["am_lock"][p] and p not in order]
        assert order[0] == first and order[-1] == last, \
            f"marker lock order {order}, want {first} first, {last} last (seed {tb.seed})"
    await wait_for(lambda t: t and t["link_up"], "link up")
    await tb.run_until(tb.cycle + tb.cyc(2 * tb.P))
    tb.check_tx()
    tb.check_runs(allow_errors_in=windows)
    export_coverage()
