"""Amaranth-simulator tests of the FEC PCS receiver (:class:`FecPcsRx`) against the numpy
model :func:`fusionfabric.sim.fec_pcs.receive`.

Lane input comes from :func:`fusionfabric.sim.fec_pcs.transmit` of seeded random client
words, with the lanes permuted, skewed, bit-slipped, corrupted or dark as each test says;
the model receives the same lane symbols. The delivered word stream must equal the
model's (or, where the model has no notion of the disturbance, a bit slip or a lock loss,
the transmitted word stream from the lock marker on), and the counters the model's
counters. Tests where the decoder's correction is not the subject build the receiver with
``bypass_correction=True`` (the decoder detects only; on clean lanes the result is the
same) because that decoder simulates three times faster. Every random draw is seeded and
a failure names its seed.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator

from fusionfabric.formats.pcs import BlockType, control_word
from fusionfabric.rtl.blocks import disown_failed
from fusionfabric.rtl.fec import FecPcsRx
from fusionfabric.rtl.fec.lock import HUNT_PERIODS, LOSS_LIMIT
from fusionfabric.rtl.fec.pcs_rx import rx_latency
from fusionfabric.sim import fec, fec_pcs

N = fec.N
ERROR = control_word(BlockType.ERROR)
TYPES = [int(t) for t in BlockType]


def client_words(rng, count):
    """Random client words: data words and control words of the project's types."""
    data = rng.integers(0, 1 << 63, count, dtype=np.uint64) * np.uint64(2) \
        + rng.integers(0, 2, count, dtype=np.uint64)
    ctrl = rng.random(count) < 0.25
    body = rng.integers(0, 1 << 56, count, dtype=np.uint64)
    kinds = rng.integers(0, len(TYPES), count)
    for i in np.flatnonzero(ctrl):
        data[i] = control_word(TYPES[kinds[i]], int(body[i]))
    return data, ctrl


def lane_words(bits, S):
    """A lane's bit stream (bit 0 first) cut into ``10 S``-bit words (ints), zero padded."""
    W = 10 * S
    bits = np.asarray(bits, dtype=np.uint8)
    bits = np.concatenate([bits, np.zeros((-bits.size) % W, np.uint8)]).reshape(-1, W)
    packed = np.packbits(bits, axis=1, bitorder="little")
    return [int.from_bytes(row.tobytes(), "little") for row in packed]


def symbol_words(symbols, S):
    return lane_words(fec.symbol_bits(np.asarray(symbols, dtype=np.int64)), S)


class Run:
    """Drive ``dut`` with one word list per physical lane (0 after its end) for ``cycles``
    cycles; record delivered words with the cycle of their row, link-up changes and the
    counters (at the end, and when ``o_codewords`` first reaches ``snap_at``)."""

    def __init__(self, dut, words, cycles, snap_at=None, until_words=None):
        self.dut, self.words, self.cycles, self.snap_at = dut, words, cycles, snap_at
        self.until_words = until_words
        self.data, self.ctrl, self.row_cycle = [], [], []
        self.link_edges = []          # (cycle, new value)
        self.snap = None
        self.end = None
        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(self._bench)
        sim.run()
        self.data = np.array(self.data, dtype=np.uint64)
        self.ctrl = np.array(self.ctrl, dtype=bool)

    def counters(self, ctx):
        d = self.dut
        return dict(codewords=ctx.get(d.o_codewords),
                    corrected_codewords=ctx.get(d.o_corrected_codewords),
                    corrected_symbols=ctx.get(d.o_corrected_symbols),
                    uncorrectable=ctx.get(d.o_uncorrectable),
                    symbol_errors=[ctx.get(d.o_symbol_errors[k]) for k in range(d.n_lanes)],
                    relocks=ctx.get(d.o_relocks), am_lock=ctx.get(d.o_am_lock),
                    lane_id=[ctx.get(d.o_lane_id[k]) for k in range(d.n_lanes)])

    async def _bench(self, ctx):
        d = self.dut
        payload = Value.cast(d.o_data.payload)
        link = 0
        mask = (1 << 64) - 1
        for c in range(self.cycles):
            for p, w in enumerate(self.words):
                ctx.set(d.i_lanes[p], w[c] if c < len(w) else 0)
            await ctx.tick()
            # values after the edge closing cycle c: the registered outputs of cycle c + 1
            if ctx.get(d.o_data.valid):
                v = ctx.get(payload)
                for i in range(d.n_words):
                    x = v >> (65 * i)
                    self.data.append(x & mask)
                    self.ctrl.append((x >> 64) & 1)
                    self.row_cycle.append(c + 1)
            up = ctx.get(d.o_link_up)
            if up != link:
                self.link_edges.append((c + 1, up))
                link = up
            if self.snap_at is not None and self.snap is None \
                    and ctx.get(d.o_codewords) >= self.snap_at:
                self.snap = self.counters(ctx)
            if self.until_words is not None and len(self.data) >= self.until_words \
                    and (self.snap_at is None or self.snap is not None):
                break
        self.end = self.counters(ctx)


def model_counters(cnt):
    return dict(codewords=int(cnt.codewords), corrected_codewords=int(cnt.corrected_codewords),
                corrected_symbols=int(cnt.corrected_symbols),
                uncorrectable=int(cnt.uncorrectable_codewords),
                symbol_errors=[int(x) for x in cnt.symbol_errors_per_lane])


def rx_counters(snap):
    return {k: snap[k] for k in ("codewords", "corrected_codewords", "corrected_symbols",
                                 "uncorrectable", "symbol_errors")}


def check_against_model(run, ref, seed):
    """The delivered words are the model's (a prefix of them: rows are whole); the counters
    after the model's last codeword equal the model's."""
    m = ref.data.size
    assert run.data.size >= m - run.dut.n_words + 1, \
        f"seed {seed}: {run.data.size} words delivered, the model delivers {m}"
    k = min(m, run.data.size)
    bad = np.flatnonzero((run.data[:k] != ref.data[:k]) | (run.ctrl[:k] != ref.ctrl[:k]))
    assert bad.size == 0, f"seed {seed}: {bad.size} words differ, first at {bad[0]}: " \
        f"rtl {int(run.data[bad[0]]):#x}/{int(run.ctrl[bad[0]])} model " \
        f"{int(ref.data[bad[0]]):#x}/{int(ref.ctrl[bad[0]])}"
    assert run.snap is not None, f"seed {seed}: the receiver decoded fewer codewords"
    assert rx_counters(run.snap) == model_counters(ref.counters), f"seed {seed}"


def transmitted(n, am, periods, seed):
    rng = np.random.default_rng(seed)
    count = fec_pcs.words_per_period(n, am) * periods
    d, c = client_words(rng, count)
    tx = fec_pcs.transmit(d, c, n, am)
    pad = np.full(tx.n_pad, control_word(BlockType.IDLE), dtype=np.uint64)
    words = np.concatenate([d, pad]), np.concatenate([c, np.ones(tx.n_pad, bool)])
    return rng, tx, words


def flush(dut):
    """Cycles after the input for the last complete codeword to come out as rows."""
    return 2 * dut.B + dut.latency


# ---- clean lanes --------------------------------------------------------------------------
@pytest.mark.parametrize("n, P, am, periods, nw, bypass, pipe", [
    (2, 8, 2, 2, 2, True, False),
    (2, 8, 2, 2, 2, False, True),      # decoder_pipeline: 2 cycles more latency
    pytest.param(1, 8, 3, 2, 2, True, False, marks=pytest.mark.soak),
    pytest.param(4, 8, 2, 3, 2, False, False, marks=pytest.mark.soak),
    pytest.param(4, 16, 2, 3, 4, True, False, marks=pytest.mark.soak),
    pytest.param(4, 4, 2, 2, 1, True, False, marks=pytest.mark.soak)])
def test_clean(n, P, am, periods, nw, bypass, pipe):
    """Clean lanes: the model's words and counters; link up at ``lock_cycles``, the
    first word of a codeword ``latency`` cycles after its first lane symbol."""
    seed = 100 + n + P
    _, tx, words = transmitted(n, am, periods, seed)
    dut = FecPcsRx(n, P, nw, am, bypass_correction=bypass, decoder_pipeline=pipe)
    if pipe:
        assert dut.latency == rx_latency(n, P) + 2
    ref = fec_pcs.receive(list(tx.lanes), n, am)
    lw = [symbol_words(tx.lanes[p], dut.S) for p in range(n)]
    run = Run(dut, lw, len(lw[0]) + flush(dut), snap_at=int(ref.counters.codewords),
              until_words=ref.data.size)
    check_against_model(run, ref, seed)
    # the model's stream is the transmitted one from the second marker on
    off = fec_pcs.lock_offset_words(n, am)
    assert np.array_equal(ref.data, words[0][off:off + ref.data.size])
    # lock and latency as documented (rows of 2 or 4 words: a block's 4 words start a row)
    assert run.link_edges[0] == (dut.lock_cycles, 1), f"seed {seed}: {run.link_edges}"
    first_cw1 = (fec_pcs.BLOCKS_PER_CW - fec_pcs.am_blocks(n) - 1) * 4   # cw after the lock
    assert run.row_cycle[first_cw1] - (am + 1) * dut.B == dut.latency
    assert run.row_cycle[0] - am * dut.B == dut.latency
    assert run.end["relocks"] == 0 and run.end["am_lock"] == (1 << n) - 1
    assert sorted(run.end["lane_id"]) == list(range(n))


# ---- symbol errors --------------------------------------------------------------------------
def corrupt(rng, lanes, n, first_cw, schedule):
    """Plant errors in the codewords from ``first_cw`` on, codeword ``first_cw + i`` by
    ``schedule[i % len]``: ``("random", k)`` k symbols anywhere, ``("parity", k)`` k of
    the 30 parity symbols, ``("burst", k)`` k consecutive codeword positions (so k
    neighbouring symbols of every lane), ``("bits", b)`` a burst of b bits in one lane's
    bit stream starting mid-symbol (crossing symbol boundaries)."""
    lanes = lanes.copy()
    chunk = N // n
    ncw = lanes.shape[1] // chunk
    for cw in range(first_cw, ncw):
        kind, k = schedule[(cw - first_cw) % len(schedule)]
        if kind == "mix":
            for part in (("burst", 5), ("bits", 47), ("parity", 4)):
                lanes[:, cw * chunk:(cw + 1) * chunk] = corrupt(
                    rng, lanes[:, cw * chunk:(cw + 1) * chunk], n, 0, [part])
            continue
        if kind == "bits":
            lane = int(rng.integers(n))
            start = cw * chunk * 10 + int(rng.integers(1, 10)) \
                + 10 * int(rng.integers(chunk - k // 10 - 2))
            bits = fec.symbol_bits(lanes[lane])
            bits[start:start + k] ^= rng.integers(0, 2, k, dtype=np.uint8) | \
                np.r_[1, np.zeros(k - 2, np.uint8), 1].astype(np.uint8)   # both ends flipped
            lanes[lane] = fec.bits_symbols(bits)
            continue
        if kind == "random":
            pos = rng.choice(N, k, replace=False)
        elif kind == "parity":
            pos = fec.K + rng.choice(N - fec.K, k, replace=False)
        else:
            s0 = int(rng.integers(0, N - k))
            pos = np.arange(s0, s0 + k)
        for q in pos:
            lanes[q % n, cw * chunk + q // n] ^= int(rng.integers(1, 1 << 10))
    return lanes


SCHEDULE = [("random", 1), ("random", 16), ("parity", 15), ("random", 30), ("random", 0),
            ("bits", 47), ("burst", 15), ("random", 15), ("parity", 16)]


def run_errors(n, P, am, periods, seed, schedule=SCHEDULE, n_words=2):
    rng, tx, _ = transmitted(n, am, periods, seed)
    lanes = corrupt(rng, tx.lanes, n, am, schedule)
    dut = FecPcsRx(n, P, n_words, am)
    ref = fec_pcs.receive(list(lanes), n, am)
    assert ref.counters.uncorrectable_codewords and ref.counters.corrected_codewords
    lw = [symbol_words(lanes[p], dut.S) for p in range(n)]
    run = Run(dut, lw, len(lw[0]) + flush(dut), snap_at=int(ref.counters.codewords),
              until_words=ref.data.size)
    check_against_model(run, ref, seed)
    assert ref.error.any() and (run.data[:ref.data.size][ref.error] == ERROR).all()


def test_errors():
    """Correctable (1, 15, parity only, bursts) and uncorrectable (16, 30) codewords: the
    same words (ERROR where the model puts them) and counters as the model."""
    run_errors(2, 8, 2, 2, seed=7, schedule=[("mix", 15), ("random", 16), ("random", 15),
                                             ("random", 30), ("random", 1)])


@pytest.mark.soak
@pytest.mark.parametrize("n, P, am, seed", [(1, 8, 3, 11), (4, 8, 2, 12), (4, 16, 4, 13),
                                            (2, 8, 3, 14)])
def test_errors_soak(n, P, am, seed):
    run_errors(n, P, am, 4, seed, n_words=2 if P <= 8 else 3)


# ---- permuted and skewed lanes ----------------------------------------------------------------
def test_permuted_skewed():
    """Physical lane p carries logical lane perm[p], delayed by skew[p] symbols: the same
    words and counters as the model, lane ids and am_lock as the model's lane map."""
    n, P, am, seed, max_skew = 4, 8, 2, 21, 24
    rng, tx, _ = transmitted(n, am, 2, seed)
    perm = [2, 0, 3, 1]
    skew = [5, 0, 24, 13]          # below max_skew; 24 - 0 = the largest allowed
    lanes = [np.concatenate([rng.integers(0, 1024, skew[p]), tx.lanes[perm[p]]])
             for p in range(n)]
    ref = fec_pcs.receive(lanes, n, am, max_skew=max_skew)
    assert ref.counters.aligned and list(ref.counters.skew) == skew
    dut = FecPcsRx(n, P, 2, am, max_skew=max_skew, bypass_correction=True)
    lw = [symbol_words(lanes[p], dut.S) for p in range(n)]
    run = Run(dut, lw, max(map(len, lw)) + flush(dut), snap_at=int(ref.counters.codewords),
              until_words=ref.data.size)
    check_against_model(run, ref, seed)
    assert run.end["lane_id"] == list(ref.counters.lane_map)
    assert run.end["am_lock"] == (1 << n) - 1


def test_skew_too_large():
    """One symbol more skew than max_skew: no alignment, nothing delivered (as the model)."""
    n, P, am, seed, max_skew = 2, 8, 2, 22, 9
    rng, tx, _ = transmitted(n, am, 2, seed)
    lanes = [tx.lanes[0], np.concatenate([rng.integers(0, 1024, max_skew + 1), tx.lanes[1]])]
    ref = fec_pcs.receive(lanes, n, am, max_skew=max_skew)
    assert not ref.counters.aligned and ref.data.size == 0
    dut = FecPcsRx(n, P, 2, am, max_skew=max_skew, bypass_correction=True)
    lw = [symbol_words(lanes[p], dut.S) for p in range(n)]
    run = Run(dut, lw, 2 * am * dut.B + 20)
    assert run.data.size == 0 and run.link_edges == []
    assert run.end["am_lock"] == 3 and run.end["codewords"] == 0


# ---- bit slip ------------------------------------------------------------------------------
def check_suffix(run, words, n, am, seed, start=0):
    """The words delivered from ``start`` on are the transmitted stream from a lock marker
    on (lock_offset_words of some period)."""
    got_d, got_c = run.data[start:], run.ctrl[start:]
    assert got_d.size, f"seed {seed}: nothing delivered"
    for period in range(1, 40):
        off = fec_pcs.lock_offset_words(n, am, period)
        k = min(got_d.size, words[0].size - off)
        if k > 0 and np.array_equal(got_d[:k], words[0][off:off + k]) \
                and np.array_equal(got_c[:k], words[1][off:off + k]):
            return period, k
    raise AssertionError(f"seed {seed}: the delivered words are no lock-marker suffix "
                         "of the transmitted stream")


@pytest.mark.parametrize("slip_bits", [9])
def test_bit_slip(slip_bits):
    """Lane 1 starts ``slip_bits`` bits late (not on a symbol boundary): it slips to the
    right bit offset, locks, the link comes up, and the words from the lock on are the
    transmitted ones."""
    n, P, am, seed = 2, 8, 2, 31
    slips = (10 - slip_bits % 10) % 10            # the receiver delays by 1 bit per slip
    rng, tx, words = transmitted(n, am, 5 + (HUNT_PERIODS + 1) * slips, seed)
    dut = FecPcsRx(n, P, 2, am, bypass_correction=True)
    bits = [fec.symbol_bits(tx.lanes[p]) for p in range(n)]
    bits[1] = np.concatenate([rng.integers(0, 2, slip_bits, dtype=np.uint8), bits[1]])
    lw = [lane_words(b, dut.S) for b in bits]
    hunt = HUNT_PERIODS * am * dut.B
    up_by = slips * (hunt + 10) + 3 * am * dut.B
    run = Run(dut, lw, up_by + dut.latency + 2 * dut.B, until_words=40)
    assert run.link_edges and run.link_edges[0][1] == 1, f"seed {seed}: no link"
    assert run.link_edges[0][0] <= up_by
    period, k = check_suffix(run, words, n, am, seed)
    assert period >= 2 and k >= 40


# ---- dark and garbage lanes ------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["dark", "random", "one_dark", "same_id"])
def test_dark_garbage(kind):
    """All-zero lanes, random bits, one good lane and one dark, or the same lane twice (ids
    not a permutation): nothing delivered, no link, no codeword; am_lock and lane ids as
    the model's lane map."""
    n, P, am, seed = 2, 8, 2, 41
    rng, tx, _ = transmitted(n, am, 2, seed)
    cycles = 2 * am * (N // P) + 20
    S = P // n
    if kind == "dark":
        syms = [np.zeros(cycles * S, np.int64) for _ in range(n)]
    elif kind == "random":
        syms = [rng.integers(0, 1024, cycles * S) for _ in range(n)]
    elif kind == "one_dark":
        syms = [tx.lanes[0][:cycles * S], np.zeros(cycles * S, np.int64)]
    else:
        syms = [tx.lanes[1][:cycles * S], tx.lanes[1][:cycles * S]]
    ref = fec_pcs.receive(syms, n, am)
    assert ref.data.size == 0 and not ref.counters.aligned
    dut = FecPcsRx(n, P, 2, am, bypass_correction=True)
    run = Run(dut, [symbol_words(s, S) for s in syms], cycles)
    assert run.data.size == 0 and run.link_edges == []
    assert run.end["codewords"] == 0 and run.end["relocks"] == 0
    locked = [(run.end["am_lock"] >> p) & 1 for p in range(n)]
    assert locked == [int(k >= 0) for k in ref.counters.lane_map]
    for p in range(n):
        if locked[p]:
            assert run.end["lane_id"][p] == ref.counters.lane_map[p]


# ---- lock loss and relock --------------------------------------------------------------------
def test_lock_loss_relock():
    """Lane 1 of 2 goes dark at a marker codeword for LOSS_LIMIT marker periods: the words
    before are the model's, then ERROR words until the lane loses lock at the
    LOSS_LIMIT-th missing marker (link down, nothing delivered); the lane is back for the
    next marker (before its hunt time is up, so at the same bit offset), relocks one
    period later, and the words are the transmitted stream from that lock marker on."""
    n, P, am, seed = 2, 16, 2, 51
    rng, tx, words = transmitted(n, am, 8, seed)
    dut = FecPcsRx(n, P, 3, am, bypass_correction=True)
    B, per = dut.B, am * dut.B
    dark_from = 2 * per                        # cycles, the start of a marker codeword
    dark_to = dark_from + LOSS_LIMIT * per
    lanes = tx.lanes.copy()
    S = dut.S
    lanes[1, dark_from * S:dark_to * S] = 0
    ref = fec_pcs.receive(list(tx.lanes[:, :dark_from * S]), n, am)
    dark = fec_pcs.receive(list(lanes[:, :dark_to * S]), n, am)   # the model does not lose lock
    lw = [symbol_words(lanes[p], S) for p in range(n)]
    run = Run(dut, lw, dark_to + per + dut.latency + 2 * B)
    ups = [c for c, v in run.link_edges if v]
    downs = [c for c, v in run.link_edges if not v]
    assert len(ups) == 2 and len(downs) == 1 and ups[0] < downs[0] < ups[1], run.link_edges
    # the LOSS_LIMIT-th missing marker loses the lock; the next one confirms the relock
    assert downs[0] == dark_from + (LOSS_LIMIT - 1) * per + dut.lock_cycles - per
    assert ups[1] == dark_to + dut.lock_cycles
    assert run.end["relocks"] == 1
    cut = np.searchsorted(run.row_cycle, ups[1])
    m = ref.data.size
    assert np.array_equal(run.data[:m], ref.data) and np.array_equal(run.ctrl[:m], ref.ctrl)
    assert cut > m and np.array_equal(run.data[:cut], dark.data[:cut])
    assert (run.data[m:cut] == ERROR).all() and run.ctrl[m:cut].all()
    assert max(run.row_cycle[:cut]) <= downs[0] + dut.latency
    period, k = check_suffix(run, words, n, am, seed, start=cut)
    assert period == dark_to // per + 1 and k >= 20


@pytest.mark.soak
@pytest.mark.parametrize("slip_bits", [3, 14])
def test_bit_slip_soak(slip_bits):
    test_bit_slip(slip_bits)


@pytest.mark.soak
def test_slip_after_lock():
    """Lane 0 slips one bit (a bit lost) after the link is up: lock lost after
    LOSS_LIMIT missing markers, one bit slip of the hunt, relock; the words after the
    relock are the transmitted stream from a lock marker on."""
    n, P, am, seed = 2, 16, 2, 61
    rng, tx, words = transmitted(n, am, 30, seed)
    dut = FecPcsRx(n, P, 3, am, bypass_correction=True)
    per = am * dut.B
    bits = [fec.symbol_bits(tx.lanes[p]) for p in range(n)]
    at = 3 * per * dut.S * 10 + 123
    bits[0] = np.concatenate([bits[0][:at], bits[0][at + 1:]])   # a bit lost: 1 slip
    lw = [lane_words(b, dut.S) for b in bits]
    run = Run(dut, lw, 3 * per + (LOSS_LIMIT + HUNT_PERIODS + 4) * per + dut.latency)
    ups = [c for c, v in run.link_edges if v]
    assert len(ups) == 2 and run.end["relocks"] == 1, run.link_edges
    period, k = check_suffix(run, words, n, am, seed, start=np.searchsorted(run.row_cycle, ups[1]))
    assert k >= 20


def test_bad_params():
    for kwargs, name in [(dict(n_lanes=3), "n_lanes=3"),
                         (dict(symbols=32, n_words=5), "symbols=32"),
                         (dict(n_words=1), "n_words=1"), (dict(am_period=1), "am_period=1"),
                         (dict(am_period=2, max_skew=272), "max_skew=272"),
                         (dict(counter_width=0), "counter_width=0")]:
        with pytest.raises(ValueError, match=name) as exc:
            FecPcsRx(**kwargs)
        disown_failed(exc.value)       # the half-built receiver raises no UnusedElaboratable
    with pytest.raises(TypeError, match="decoder_pipeline=1 must be a bool") as exc:
        FecPcsRx(decoder_pipeline=1)
    disown_failed(exc.value)
