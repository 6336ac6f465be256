"""Receive side of the FEC PCS profile: FEC lanes -> RS(544,514) decode -> 256b/257b ->
client words (docs/fec.md; the golden model is :func:`fusionfabric.sim.fec_pcs.receive`)."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats import fec as code
from fusionfabric.formats.fec_pcs import (AM_PERIOD, BLOCKS_PER_CW, XBITS, am_blocks,
                                          check_params)
from fusionfabric.formats.pcs import KNOWN_TYPES, WORD, BlockType, control_word
from fusionfabric.rtl.fec.decoder import RsDecoder, decoder_latency
from fusionfabric.rtl.fec.deskew import Deskew
from fusionfabric.rtl.fec.lock import HUNT_PERIODS, ID_BITS, LOSS_LIMIT, LaneLock
from fusionfabric.rtl.hdl import popcount

__all__ = ["FecPcsRx", "rx_latency", "detranscode", "MAX_SYMBOLS", "LOSS_LIMIT", "HUNT_PERIODS"]

SB = code.M
#: Largest P: the block extractor takes at most one 257-bit block per beat (10 P <= 257).
MAX_SYMBOLS = XBITS // SB
_ERROR = control_word(BlockType.ERROR)
_TYPE_BY_NIBBLE = {t & 0xF: t for t in KNOWN_TYPES}
if len(_TYPE_BY_NIBBLE) != len(KNOWN_TYPES):
    raise ValueError("block types share a low nibble: the 257b compression is ambiguous")


def detranscode(m: Module, bits, name: str = "dtc"):
    """Combinational 256b/257b decoder of one block (docs/fec.md, cl. 91.5.3.5).

    ``bits``: the 257-bit block, bit 0 first. Returns ``(words, error)``: four
    ``(data, ctrl)`` Signal pairs, word 0 first, and the invalid flag. Bit 0 = 1: four data
    words. Bit 0 = 0: bits 1..4 flag data (1) or control (0) words; the first control
    word's dropped type nibble is rebuilt from its kept low nibble. No control flag, or a
    low nibble naming no block type, is invalid: four ``ERROR`` control words.
    """
    b0 = bits[0]
    flags = bits[1:5]
    body = bits[5:XBITS]
    first = Signal(2, name=f"{name}_first")
    for f in reversed(range(4)):
        with m.If(~flags[f]):
            m.d.comb += first.eq(f)
    nib = Signal(4, name=f"{name}_nib")
    m.d.comb += nib.eq(Mux(first == 0, body[0:4], Mux(first == 1, body[64:68],
                       Mux(first == 2, body[128:132], body[192:196]))))
    hi = Signal(4, name=f"{name}_hi")
    known = Signal(name=f"{name}_known")
    with m.Switch(nib):
        for lo, t in _TYPE_BY_NIBBLE.items():
            with m.Case(lo):
                m.d.comb += [hi.eq(t >> 4), known.eq(1)]
    full = Signal(256, name=f"{name}_full")
    variants = [Cat(body[0:64 * f + 4], hi, body[64 * f + 4:252]) for f in range(4)]
    m.d.comb += full.eq(Mux(first == 0, variants[0], Mux(first == 1, variants[1],
                        Mux(first == 2, variants[2], variants[3]))))
    err = Signal(name=f"{name}_err")
    m.d.comb += err.eq(~b0 & (flags.all() | ~known))
    words = []
    for j in range(4):
        d = Signal(64, name=f"{name}_data{j}")
        c = Signal(name=f"{name}_ctrl{j}")
        m.d.comb += [d.eq(Mux(err, _ERROR, Mux(b0, bits[1 + 64 * j:65 + 64 * j],
                                                 full[64 * j:64 * (j + 1)]))),
                     c.eq(err | (~b0 & ~flags[j]))]
        words.append((d, c))
    return words, err


def rx_latency(n_lanes: int, symbols: int, bypass_correction: bool = False,
               decoder_pipeline: bool = False) -> int:
    """:attr:`FecPcsRx.latency` of a receiver with these parameters, without building one."""
    S, B = symbols // n_lanes, code.N // symbols
    return -(-8 // S) + decoder_latency(B, bypass_correction, decoder_pipeline) + B + 3


class FecPcsRx(wiring.Component):
    """Receive ``n_lanes`` FEC lanes and deliver the client word stream.

    Pipeline (the steps of :func:`fusionfabric.sim.fec_pcs.receive`):

    1. per physical lane, :class:`~.lock.LaneLock`: bit slip, lane-marker hunt at every
       symbol offset, lock on a marker confirmed one marker period later (same id, same
       place), loss after ``LOSS_LIMIT`` = 4 consecutive missing markers; a lane that
       does not lock within ``HUNT_PERIODS`` = 2 marker periods slips one bit;
    2. :class:`~.deskew.Deskew`: per-lane buffers line the lanes up on their markers (skew
       up to ``max_skew`` symbols) and reorder them by lane id; ``o_link_up`` is this
       alignment;
    3. the ``P``-symbol beats are rebuilt (logical lane ``k``'s symbol ``j`` is codeword
       position ``k + j n_lanes`` of the beat) and fed to :class:`~.decoder.RsDecoder`,
       a codeword every ``544 / P`` cycles, the first one the lock marker's codeword;
    4. the corrected codewords' 257-bit slots are taken out at fixed beats, the marker
       area of marker codewords dropped, the data blocks descrambled (self-synchronizing
       1 + x^39 + x^58; the first data block after alignment only primes it) and
       transcoded back to four words each (:func:`detranscode`);
    5. the words wait in a block buffer until their codeword's decode status is known
       (the decoder flags an uncorrectable codeword on its last beat): an uncorrectable
       codeword's blocks, and the first block after it, become four ``ERROR`` control
       words each, as the model delivers them;
    6. the words are packed into rows of ``n_words``, ``o_data.valid`` high when a row is
       there (no back pressure). Words short of a whole row when the link drops wait in
       the row buffer and are discarded when the next alignment's first block arrives.

    A lane losing lock drops ``o_link_up``; the codeword being fed is completed (decoded
    and counted but not delivered) and delivery stops until the lanes align again (at the
    next marker of the last lane to relock, with a new priming block). Lanes that never
    lock (dark, garbage) deliver nothing; nothing raises or hangs.

    Parameters
    ----------
    n_lanes, symbols, n_words, am_period
        As :func:`fusionfabric.formats.fec_pcs.check_params`; ``symbols`` (P) at most
        :data:`MAX_SYMBOLS` = 25 (one 257-bit block per beat).
    max_skew : int or None
        Largest lane skew in symbols the deskew buffers absorb (``ceil(max_skew / S) + 2``
        beats per lane); below half a marker period; default ``min(64, half - 1)``.
    bypass_correction : bool
        Decoder in cl. 91 bypass-correction mode (detect only; see :class:`RsDecoder`).
    decoder_pipeline : bool
        The decoder's ``pipeline`` option (:class:`RsDecoder`; docs/fec.md, "FPGA"): its
        latency, and so :attr:`latency`, grows by 2 cycles (none with
        ``bypass_correction``); same words, counters and throughput.
    counter_width : int
        Bits of the saturating counters.

    Members
    -------
    i_lanes : In(10 S).array(n_lanes)
        Physical lanes, ``S = P / n_lanes`` symbols per cycle each, bit 0 first.
    o_data : Out(Signature(payload=ArrayLayout(WORD, n_words), valid=1))
        Rows of delivered words, word 0 first (no ready: the line cannot be stalled).
    o_link_up : Out(1)
        All lanes locked, their ids a permutation, deskewed.
    o_am_lock : Out(n_lanes); o_lane_id : Out(5).array(n_lanes)
        Per physical lane: marker lock and the lane id of its markers.
    o_codewords, o_corrected_codewords, o_corrected_symbols, o_uncorrectable : Out(counter_width)
        The decoder's counters (every codeword fed, including one cut short by a lock loss).
    o_symbol_errors : Out(counter_width).array(n_lanes)
        Symbols corrected, by logical lane, in correctable codewords.
    o_relocks : Out(counter_width)
        Lane lock losses.

    Timing
    ------
    :attr:`latency` = ``ceil(8 / S) + decoder latency + 544 / P + 3`` cycles from the
    cycle a codeword's first symbol is on ``i_lanes`` (of the latest lane) to the row with
    its first delivered word on ``o_data``: the lane-beat delay ``ceil(8 / S)``, the deskew
    buffer (1), the decoder (``544 / P + 33``, or ``+ 3`` with ``bypass_correction``),
    the rest of the codeword (``544 / P - 1``: its decode status comes on its last beat),
    status buffer, row buffer and output register (3). At P = 8: 176 cycles (``S`` = 2),
    174 (``S`` = 4), 173 (``S`` = 8).
    :attr:`lock_cycles` = ``am_period * 544 / P + ceil(8 / S) + 1``: the cycle in which
    ``o_link_up`` is first high when every lane's first marker codeword starts in cycle 0
    (the second marker confirms the lock; no bit slip, no skew). The first row comes
    :attr:`latency` cycles after that second marker codeword's first symbol. A lane at a
    wrong bit offset slips every ``HUNT_PERIODS * am_period * 544 / P + ceil(7 / S) + 4``
    cycles (up to 9 slips), then locks as above (within two more marker periods).
    Throughput: every codeword, ``544 / P`` cycles each, at line rate; rows come in
    bursts after each codeword's last beat (the block buffer holds two codewords).
    """

    def __init__(self, n_lanes: int = 2, symbols: int = 8, n_words: int = 2,
                 am_period: int = AM_PERIOD, max_skew: int | None = None,
                 bypass_correction: bool = False, counter_width: int = 32,
                 decoder_pipeline: bool = False):
        check_params(n_lanes, symbols, n_words, am_period)
        if symbols > MAX_SYMBOLS:
            raise ValueError(f"symbols={symbols} must be at most {MAX_SYMBOLS} (the receiver "
                             "takes at most one 257-bit block per beat)")
        half = am_period * code.N // n_lanes // 2
        if max_skew is None:
            max_skew = min(64, half - 1)
        if isinstance(max_skew, bool) or not isinstance(max_skew, int) \
                or not 0 <= max_skew < half:
            raise ValueError(f"max_skew={max_skew!r} must be an integer in 0..{half - 1} "
                             "symbols (under half a marker period)")
        if not isinstance(bypass_correction, bool):
            raise TypeError(f"bypass_correction={bypass_correction!r} must be a bool")
        if not isinstance(decoder_pipeline, bool):
            raise TypeError(f"decoder_pipeline={decoder_pipeline!r} must be a bool")
        self.decoder_pipeline = decoder_pipeline
        if isinstance(counter_width, bool) or not isinstance(counter_width, int) \
                or not 1 <= counter_width <= 64:
            raise ValueError(f"counter_width={counter_width!r} must be an int in 1..64")
        self.n_lanes, self.P, self.n_words = n_lanes, symbols, n_words
        self.am_period, self.max_skew = am_period, max_skew
        self.bypass_correction, self.counter_width = bypass_correction, counter_width
        self.S = symbols // n_lanes
        self.B = code.N // symbols
        self.n_am = am_blocks(n_lanes)
        lane_delay = -(-8 // self.S)
        #: First lane symbol of a codeword to the row with its first word, in cycles.
        self.latency = rx_latency(n_lanes, symbols, bypass_correction, decoder_pipeline)
        #: Cycle of the first ``o_link_up`` on clean lanes whose first marker is at cycle 0.
        self.lock_cycles = am_period * self.B + lane_delay + 1
        cw = counter_width
        super().__init__({
            "i_lanes": In(SB * self.S).array(n_lanes),
            "o_data": Out(wiring.Signature({
                "payload": Out(data.ArrayLayout(WORD.layout(), n_words)),
                "valid": Out(1)})),
            "o_link_up": Out(1),
            "o_am_lock": Out(n_lanes),
            "o_lane_id": Out(ID_BITS).array(n_lanes),
            "o_codewords": Out(cw), "o_corrected_codewords": Out(cw),
            "o_corrected_symbols": Out(cw), "o_uncorrectable": Out(cw),
            "o_symbol_errors": Out(cw).array(n_lanes),
            "o_relocks": Out(cw),
        })

    def elaborate(self, platform):
        m = Module()
        n, P, S, B, nw = self.n_lanes, self.P, self.S, self.B, self.n_words
        top = (1 << self.counter_width) - 1

        # ---- lanes: lock, deskew, reorder ---------------------------------------------------
        m.submodules.deskew = dsk = Deskew(n, S, self.max_skew)
        lost = []
        for p in range(n):
            lk = LaneLock(n, S, self.am_period)
            m.submodules[f"lock{p}"] = lk
            m.d.comb += [lk.i_word.eq(self.i_lanes[p]), dsk.i_beat[p].eq(lk.o_beat),
                         dsk.i_marker[p].eq(lk.o_marker), dsk.i_locked[p].eq(lk.o_locked),
                         dsk.i_id[p].eq(lk.o_id), dsk.i_offset[p].eq(lk.o_offset),
                         self.o_am_lock[p].eq(lk.o_locked), self.o_lane_id[p].eq(lk.o_id)]
            lost.append(lk.o_lost)
        aligned = dsk.o_aligned
        m.d.comb += self.o_link_up.eq(aligned)
        n_lost = popcount(Cat(*lost))
        total = Signal(self.counter_width + 6)
        m.d.comb += total.eq(self.o_relocks + n_lost)
        m.d.sync += self.o_relocks.eq(Mux(total > top, top, total))

        # ---- codeword beats into the decoder -------------------------------------------------
        m.submodules.decoder = dec = RsDecoder(P, bypass_correction=self.bypass_correction,
                                               counter_width=self.counter_width,
                                               pipeline=self.decoder_pipeline)
        beat = Signal(SB * P)
        for k in range(n):
            for j in range(S):
                pos = k + j * n
                m.d.comb += beat[SB * pos:SB * (pos + 1)].eq(dsk.o_beats[k][SB * j:SB * (j + 1)])
        b_in = Signal(range(B))
        cw_in = Signal(range(self.am_period))
        cw_ok = Signal()
        fresh = Signal()
        feeding = Signal()
        m.d.comb += [feeding.eq(aligned | (b_in != 0)),
                     dec.i_data.valid.eq(feeding), dec.i_data.payload.data.eq(beat),
                     dec.i_data.payload.first.eq(b_in == 0), dec.o_data.ready.eq(1)]
        # tags of each fed codeword, from its last input beat to its last output beat
        m.submodules.tags = tags = fifo.SyncFIFO(width=3, depth=4)
        deliver_in = Signal()
        m.d.comb += [deliver_in.eq(aligned & Mux(b_in == 0, 1, cw_ok)),
                     tags.w_data.eq(Cat(deliver_in, cw_in == 0, fresh)),
                     tags.w_en.eq(feeding & (b_in == B - 1))]
        with m.If(feeding):
            m.d.sync += [b_in.eq(Mux(b_in == B - 1, 0, b_in + 1)), cw_ok.eq(deliver_in)]
            with m.If(b_in == B - 1):
                m.d.sync += [cw_in.eq(Mux(cw_in == self.am_period - 1, 0, cw_in + 1)),
                             fresh.eq(0)]
        with m.Else():
            m.d.sync += [cw_in.eq(0), fresh.eq(1)]

        # ---- decoder output: counters ---------------------------------------------------------
        out = dec.o_data.payload
        ov = dec.o_data.valid
        m.d.comb += [self.o_codewords.eq(dec.o_codewords),
                     self.o_corrected_codewords.eq(dec.o_corrected_codewords),
                     self.o_corrected_symbols.eq(dec.o_corrected_symbols),
                     self.o_uncorrectable.eq(dec.o_uncorrectable)]
        for k in range(n):
            acc = Signal(range(code.N + 1), name=f"lane_errors{k}")
            now = Signal(range(S + 1), name=f"lane_errors_now{k}")
            m.d.comb += now.eq(popcount(Cat(*[out.error[k + j * n] for j in range(S)])))
            cnt = self.o_symbol_errors[k]
            base = Mux(out.first, 0, acc)
            total_k = Signal(self.counter_width + 11, name=f"lane_errors_sum{k}")
            m.d.comb += total_k.eq(cnt + base + now)
            with m.If(ov):
                m.d.sync += acc.eq(base + now)
                with m.If(out.last & ~out.uncorrectable):
                    m.d.sync += cnt.eq(Mux(total_k > top, top, total_k))

        # ---- decoder output: 257-bit slots ----------------------------------------------------
        tag_deliver, tag_am, tag_fresh = tags.r_data[0], tags.r_data[1], tags.r_data[2]
        m.d.comb += tags.r_en.eq(ov & out.last)
        b_out = Signal(range(B))
        idx = Signal(range(B))
        m.d.comb += idx.eq(Mux(out.first, 0, b_out))
        with m.If(ov):
            m.d.sync += b_out.eq(Mux(out.last, 0, idx + 1))
        bw = SB * P
        nwin = -(-XBITS // bw) + 1
        prevs = [Signal(bw, name=f"out_d{i}") for i in range(nwin - 1)]   # prevs[-1] newest
        with m.If(ov):
            for i in range(nwin - 1):
                m.d.sync += prevs[i].eq(prevs[i + 1] if i + 1 < nwin - 1 else out.data)
        window = Cat(*prevs, out.data)
        nam = self.n_am
        blk1 = Signal(XBITS)
        v1, first1, last1, prime1 = Signal(), Signal(), Signal(), Signal()
        m.d.sync += v1.eq(0)
        with m.If(ov):
            with m.Switch(idx):
                for i in range(BLOCKS_PER_CW):
                    done = (XBITS * i + XBITS - 1) // bw
                    pos = XBITS * i - bw * (done - nwin + 1)
                    with m.Case(done):
                        is_first = Mux(tag_am, i == nam, i == 0)
                        m.d.sync += [blk1.eq(window[pos:pos + XBITS]),
                                     v1.eq(tag_deliver & ~(tag_am & (i < nam))),
                                     first1.eq(is_first), last1.eq(i == BLOCKS_PER_CW - 1),
                                     prime1.eq(tag_fresh & is_first)]

        # descramble: out[t] = in[t] ^ in[t - 39] ^ in[t - 58] over the data blocks
        hist = Signal(58)
        ext = Cat(hist, blk1)
        blk2 = Signal(XBITS)
        v2, first2, last2, start2 = Signal(), Signal(), Signal(), Signal()
        primed = Signal()             # the priming block went by, its successor not yet
        m.d.sync += v2.eq(v1 & ~prime1)
        with m.If(v1):
            m.d.sync += [hist.eq(blk1[XBITS - 58:]),
                         blk2.eq(blk1 ^ ext[19:19 + XBITS] ^ ext[0:XBITS]),
                         first2.eq(first1), last2.eq(last1), start2.eq(primed & ~prime1),
                         primed.eq(prime1)]
        words, _ = detranscode(m, blk2)

        # ---- block buffer and codeword status ----------------------------------------------
        WB = 65
        m.submodules.blocks = blocks = fifo.SyncFIFO(width=4 * WB + 3,
                                                     depth=2 * BLOCKS_PER_CW + 8)
        m.submodules.status = status = fifo.SyncFIFO(width=1, depth=4)
        m.d.comb += [blocks.w_data.eq(Cat(*[Cat(d, c) for d, c in words], first2, last2,
                                          start2)),
                     blocks.w_en.eq(v2),
                     status.w_data.eq(out.uncorrectable),
                     status.w_en.eq(ov & out.last & tag_deliver)]

        # ---- rows --------------------------------------------------------------------------
        W = nw + 4
        wbuf = [Signal(WB, name=f"row_buf{i}") for i in range(W)]
        fill = Signal(range(W + 1))
        emit = Signal()
        rest = Signal(range(W + 1))
        take = Signal()
        prev_bad = Signal()
        r_first, r_last, r_start = (blocks.r_data[4 * WB], blocks.r_data[4 * WB + 1],
                                    blocks.r_data[4 * WB + 2])
        # a session's first block drops a partial row left from the previous session
        m.d.comb += [emit.eq(fill >= nw),
                     rest.eq(Mux(blocks.r_rdy & r_start, 0, Mux(emit, fill - nw, fill))),
                     take.eq(blocks.r_rdy & status.r_rdy & (rest + 4 <= W)),
                     blocks.r_en.eq(take)]
        bad = Signal()
        m.d.comb += bad.eq(status.r_data[0] | (r_first & prev_bad))
        m.d.comb += status.r_en.eq(take & r_last)
        with m.If(take & r_last):
            m.d.sync += prev_bad.eq(status.r_data[0])
        inw = [Mux(bad, Const(_ERROR | (1 << 64), WB), blocks.r_data[WB * j:WB * (j + 1)])
               for j in range(4)]
        for i in range(W):
            shifted = Mux(emit, wbuf[i + nw] if i + nw < W else Const(0, WB), wbuf[i])
            new = shifted
            for j in range(4):
                if i - j >= 0:
                    new = Mux(take & (rest == i - j), inw[j], new)
            m.d.sync += wbuf[i].eq(new)
        m.d.sync += [fill.eq(rest + Mux(take, 4, 0)), self.o_data.valid.eq(emit)]
        for i in range(nw):
            m.d.sync += [self.o_data.payload[i].data.eq(wbuf[i][:64]),
                         self.o_data.payload[i].ctrl.eq(wbuf[i][64])]
        return m
