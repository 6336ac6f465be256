"""Multi-lane 64b/66b PCS golden model (IEEE 802.3 cl. 49 blocks, cl. 82 lanes), pure numpy.

Transmit (:func:`transmit`, vectorized over blocks): a stream of rows of ``n_lanes`` words
(each 64 data bits plus a control flag) becomes one 66-bit block per lane per row:

- encode (cl. 49.2.4): sync header ``01`` for data, ``10`` for control in transmission order,
  i.e. the integer ``SYNC_DATA = 2`` / ``SYNC_CTRL = 1`` with the first bit in bit 0; the
  64-bit payload is the word itself, bit 0 first on the wire;
- scramble the payloads only, in stream order (row by row, lane 0 first) with the
  self-synchronizing scrambler G(x) = 1 + x^39 + x^58 (cl. 49.2.6): per bit in transmission
  order ``out = in ^ s[38] ^ s[57]``, then ``out`` shifts into ``s[0]`` (state integer: bit
  ``k`` is ``s[k]``), i.e. the project's :mod:`fusionfabric.sim.scrambler`.
- deal the blocks round robin to the lanes (row ``r``, lane ``k`` = block ``r*n_lanes + k``);
- every ``am_period`` rows, one row of alignment markers (cl. 82.2.7): row 0 after reset is a
  marker row, then ``am_period - 1`` data rows, and so on. Markers are not scrambled and do
  not advance the scrambler.

Marker (cl. 82.2.7, Figure 82-6): control sync header, payload octets
``M0 M1 M2 BIP3 ~M0 ~M1 ~M2 BIP7`` with octet 0 first on the wire (LSB first within an
octet) and ``BIP7 = ~BIP3``. ``M0 M1 M2`` for PCS lane ``k`` are the 100GBASE-R values of
IEEE 802.3 Table 82-2 (= ITU-T G.709 Table E.2), :data:`MARKERS_100G`; they were taken from
the reference model in enjoy-digital/liteeth ``test/model/pcs_100g.py`` (commit f338fc9),
which cites the same two tables, and lane 0 is checked against a published copy by the tests.

BIP (cl. 82.2.8, Table 82-4): bit ``i`` of BIP8 is the even parity of payload bits
``8j + i`` of every block; sync bit 0 joins BIP bit 3 and sync bit 1 joins BIP bit 4. BIP3
of a marker covers the lane's blocks from and including the previous marker up to but not
including this one (the first marker after reset covers nothing: BIP3 = 0).

Receive (:class:`Receiver`): a cycle-level model of the ``pcs-rx`` RTL, one raw (unaligned)
66-bit chunk per lane per cycle; see ``docs/pcs.md`` for the state machines. Its registers
after cycle ``t`` equal the RTL's registers after the same clock edge, which the tests check.

Gearbox (``serdes_width`` W in :data:`SERDES_WIDTHS`): each lane's bit stream is the
concatenation of its 66-bit blocks, bit 0 of block 0 first; a W-bit SerDes word is just the
next W bits of that stream, bit 0 first (:func:`serialize`). The transmitter's gearbox takes
a new row of blocks in the cycles where its common fill count is below W
(:func:`tx_takes`: rate W/66); the receiver's gearbox (:class:`RxGearbox`) packs W-bit words
back into unaligned 66-bit chunks on a common strobe and :class:`GearboxReceiver` steps the
66-bit :class:`Receiver` on that strobe.

Project control block types (:class:`BlockType`): the low octet of a control word's payload.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fusionfabric.formats.pcs import (AM_BAD_LIMIT, HI_BER_LIMIT, KNOWN_TYPES, LOCK_BAD, LOCK_WINDOW,
                                      M66, MARKER, MARKERS_100G, SCRAMBLER_INIT, SYNC_CTRL,
                                      SYNC_DATA, BlockType, check_params, check_serdes_width,
                                      control_word, marker_payload)
from fusionfabric.sim import scrambler as _scr

__all__ = [
    "bip8", "marker_id", "encode", "transmit", "scramble", "descramble",
    "TxResult", "Receiver", "VECTORS", "tx_takes", "serialize", "RxGearbox",
    "GearboxReceiver", "make_receiver",
]

# -- scrambler: the project's shared model (sim/scrambler.py), 64-bit words ---------------------
def scramble(words, state: int = SCRAMBLER_INIT) -> tuple[list[int], int]:
    """Scramble 64-bit payloads with :func:`fusionfabric.sim.scrambler.scramble` (cl. 49.2.6)."""
    return _scr.scramble([int(w) for w in words], 64, state)


def descramble(words, state: int = 0) -> tuple[list[int], int]:
    """Descramble 64-bit payloads with :func:`fusionfabric.sim.scrambler.descramble`."""
    if len(words) == 0:
        return [], state
    return _scr.descramble([int(w) for w in words], 64, state)


# -- blocks ---------------------------------------------------------------------------------
def bip8(sync, payload) -> np.ndarray:
    """BIP8 of blocks per IEEE 802.3 Table 82-4 (vectorized); returns ``uint8``."""
    payload = np.atleast_1d(np.asarray(payload, dtype=np.uint64))
    sync = np.atleast_1d(np.asarray(sync, dtype=np.uint8))
    octets = payload.astype("<u8").view(np.uint8).reshape(-1, 8)
    b = np.bitwise_xor.reduce(octets, axis=1)
    return b ^ ((sync & 1) << 3).astype(np.uint8) ^ (((sync >> 1) & 1) << 4).astype(np.uint8)


def _bip8_int(block: int) -> int:
    return int(bip8([block & 3], [block >> 2])[0])


_MARKER_LOOKUP = {m0 | m1 << 8 | m2 << 16: k for k, (m0, m1, m2) in enumerate(MARKERS_100G)}


def marker_id(block: int) -> int | None:
    """Lane id of a 66-bit block that is a marker (control header, ``M4..M6 = ~M0..M2``
    and ``M0..M2`` in Table 82-2), else ``None``. BIP3/BIP7 do not take part."""
    if block & 3 != SYNC_CTRL:
        return None
    p = block >> 2
    low, high = p & 0xFFFFFF, (p >> 32) & 0xFFFFFF
    if high != low ^ 0xFFFFFF:
        return None
    return _MARKER_LOOKUP.get(low)


def encode(data, ctrl) -> tuple[np.ndarray, np.ndarray]:
    """64b/66b encode words: ``(sync, payload)`` arrays (payload not yet scrambled)."""
    data = np.asarray(data, dtype=np.uint64)
    ctrl = np.asarray(ctrl, dtype=bool)
    return np.where(ctrl, SYNC_CTRL, SYNC_DATA).astype(np.uint8), data.copy()


# -- transmit -------------------------------------------------------------------------------
@dataclass
class TxResult:
    """Per-lane blocks: ``sync[k, r]`` and ``payload[k, r]`` of lane ``k``, row ``r``."""
    sync: np.ndarray
    payload: np.ndarray
    is_marker: np.ndarray
    state: int
    bip: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))

    def blocks(self, lane: int) -> list[int]:
        """Lane ``lane`` as 66-bit integers (bit 0 first on the wire)."""
        return [int(s) | int(p) << 2 for s, p in zip(self.sync[lane], self.payload[lane])]


def transmit(data, ctrl, n_lanes: int, am_period: int, state: int = SCRAMBLER_INIT,
             row0: int = 0, bip=None) -> TxResult:
    """Encode, scramble, stripe and mark the data rows sent by a ``pcs-tx``.

    ``data``/``ctrl``: the words of the data rows in stream order (``len`` a multiple of
    ``n_lanes``); a row the client left idle is ``n_lanes`` IDLE control words. ``row0`` is
    the row counter (mod ``am_period``) of the first row, ``state`` the scrambler state and
    ``bip`` the per-lane BIP accumulators before it (defaults: right after reset). The
    result has every output row in order, marker rows included.
    """
    check_params(n_lanes, am_period)
    data = np.asarray(data, dtype=np.uint64).reshape(-1)
    ctrl = np.asarray(ctrl, dtype=bool).reshape(-1)
    if data.shape != ctrl.shape or data.size % n_lanes:
        raise ValueError(f"{data.size} data words and {ctrl.size} ctrl flags: need equal "
                         f"lengths, a multiple of n_lanes={n_lanes}")
    sync, payload = encode(data, ctrl)
    scr, state = scramble(payload, state)
    payload = np.array(scr, dtype=np.uint64)
    d_rows = data.size // n_lanes
    sync = sync.reshape(d_rows, n_lanes)
    payload = payload.reshape(d_rows, n_lanes)
    # output row index of each data row, marker rows where (row0 + r) % am_period == 0
    rows, markers = [], []
    r = row0 % am_period
    out_index = []
    for _ in range(d_rows):
        while r % am_period == 0:
            markers.append(len(out_index) + len(markers))
            r += 1
        out_index.append(len(out_index) + len(markers))
        r += 1
    total = len(out_index) + len(markers)
    o_sync = np.zeros((total, n_lanes), np.uint8)
    o_pay = np.zeros((total, n_lanes), np.uint64)
    is_m = np.zeros(total, bool)
    is_m[markers] = True
    o_sync[out_index] = sync
    o_pay[out_index] = payload
    # BIP per lane over segments that start at (and include) each marker
    acc = np.zeros(n_lanes, np.uint8) if bip is None else np.array(bip, np.uint8)
    data_bip = bip8(sync.reshape(-1), payload.reshape(-1)).reshape(d_rows, n_lanes) \
        if d_rows else np.zeros((0, n_lanes), np.uint8)
    bips = np.zeros((total, n_lanes), np.uint8)
    bips[out_index] = data_bip
    marker_bip = np.uint8(_bip8_int(SYNC_CTRL | marker_payload(0, 0) << 2))  # 0x08
    prev = 0
    for m in markers:
        if m > prev:
            acc = acc ^ np.bitwise_xor.reduce(bips[prev:m], axis=0)
        for k in range(n_lanes):
            o_sync[m, k] = SYNC_CTRL
            o_pay[m, k] = marker_payload(k, int(acc[k]))
        acc = np.full(n_lanes, marker_bip, np.uint8)
        prev = m + 1
    if total > prev:
        acc = acc ^ np.bitwise_xor.reduce(bips[prev:total], axis=0)
    return TxResult(sync=o_sync.T.copy(), payload=o_pay.T.copy(), is_marker=is_m,
                    state=state, bip=acc)


def idle_row(n_lanes: int) -> tuple[list[int], list[int]]:
    return [control_word(BlockType.IDLE)] * n_lanes, [1] * n_lanes


# -- gearbox --------------------------------------------------------------------------------
def tx_takes(serdes_width: int, cycles: int) -> np.ndarray:
    """Cycles (from reset) in which a ``pcs-tx`` with ``serdes_width`` takes a new row of
    blocks: the common fill count ``f`` (bits buffered per lane, 0 after reset) is below W;
    then ``f += 66 - W``, else ``f -= W``. Rate W/66 (every cycle for W = 66)."""
    check_serdes_width(serdes_width)
    out = np.zeros(cycles, bool)
    f = 0
    for t in range(cycles):
        if f < serdes_width:
            out[t] = True
            f += 66 - serdes_width
        else:
            f -= serdes_width
    return out


def serialize(blocks, serdes_width: int) -> list[int]:
    """One lane's 66-bit blocks as the W-bit words of its bit stream (block 0 bit 0 first):
    word ``i`` is stream bits ``[i*W, (i+1)*W)``; only whole words are returned."""
    check_serdes_width(serdes_width)
    bits, count, out = 0, 0, []
    mask = (1 << serdes_width) - 1
    for b in blocks:
        bits |= (int(b) & M66) << count
        count += 66
        while count >= serdes_width:
            out.append(bits & mask)
            bits >>= serdes_width
            count -= serdes_width
    return out


class RxGearbox:
    """Model of the receiver's W→66 gearbox (all lanes share one fill count ``f``, since
    every lane brings W bits per cycle). Per cycle, with ``cat = buf | word << f``: if
    ``f + W >= 66`` the oldest 66 bits become the registered ``chunk`` (``valid = 1``) and
    ``f += W - 66``; else ``buf = cat``, ``f += W`` and ``valid = 0``. Attributes after
    :meth:`step` are the RTL's registers after the clock edge."""

    def __init__(self, n_lanes: int, serdes_width: int):
        check_serdes_width(serdes_width)
        self.n, self.W = n_lanes, serdes_width
        self.f, self.buf, self.chunk, self.valid = 0, [0] * n_lanes, [0] * n_lanes, 0

    def step(self, words) -> None:
        W, f = self.W, self.f
        full = f + W >= 66
        for p in range(self.n):
            cat = self.buf[p] | (int(words[p]) & ((1 << W) - 1)) << f
            if full:
                self.chunk[p], self.buf[p] = cat & M66, cat >> 66
            else:
                self.buf[p] = cat
        self.f = f + W - 66 if full else f + W
        self.valid = int(full)


class GearboxReceiver:
    """Cycle-level model of ``pcs-rx`` with ``serdes_width`` W < 66: :class:`RxGearbox`,
    then :class:`Receiver` stepped with the gearbox's registered chunks in the cycles where
    its ``valid`` was set (the RTL's clock enable); a delivered row is valid for the one
    cycle after the enabled edge. Other attributes are the inner receiver's."""

    def __init__(self, n_lanes: int, am_period: int, max_skew: int, ber_window: int,
                 serdes_width: int):
        check_serdes_width(serdes_width)
        if serdes_width == 66:
            raise ValueError("serdes_width=66 has no gearbox: use Receiver")
        self.core = Receiver(n_lanes, am_period, max_skew, ber_window)
        self.gearbox = RxGearbox(n_lanes, serdes_width)
        self.serdes_width = serdes_width
        self.out_valid = 0
        self.stepped = False
        self.cycle = 0

    def __getattr__(self, name):
        return getattr(self.__dict__["core"], name)

    @property
    def lock_event(self):
        return self.core.lock_event if self.stepped else ["none"] * self.core.n_lanes

    def step(self, words) -> None:
        self.stepped = bool(self.gearbox.valid)
        if self.stepped:
            self.core.step(list(self.gearbox.chunk))
        self.gearbox.step(words)
        self.out_valid = int(self.stepped and self.core.out_valid)
        self.cycle += 1

    def run(self, word_rows):
        """As :meth:`Receiver.run`, over W-bit words per cycle."""
        return Receiver.run(self, word_rows)


def make_receiver(n_lanes: int, am_period: int, max_skew: int, ber_window: int,
                  serdes_width: int = 66):
    """The receiver model of a ``pcs-rx`` with these parameters."""
    if serdes_width == 66:
        return Receiver(n_lanes, am_period, max_skew, ber_window)
    return GearboxReceiver(n_lanes, am_period, max_skew, ber_window, serdes_width)


# -- receive --------------------------------------------------------------------------------
HUNT, CHECK, LOCKED = 0, 1, 2          # marker-lock states
#: Transitions of the block-lock FSM (Figure 49-12), as reported in ``Receiver.lock_event``.
LOCK_EVENTS = ("hunt_valid", "hunt_slip", "lock_gained", "locked_valid", "locked_invalid",
               "window_good", "window_reset", "lock_lost")
A_WAIT, A_ARM, A_RUN = 0, 1, 2         # alignment states


def _desc_row(payloads: list[int], hist: int) -> tuple[list[int], int]:
    out, hist = descramble(payloads, hist)
    return out, hist


def decode(sync: int, payload: int) -> tuple[int, int, bool]:
    """Decode one descrambled block: ``(data, ctrl, error)``."""
    if sync == SYNC_DATA:
        return payload, 0, False
    if sync == SYNC_CTRL and (payload & 0xFF) in KNOWN_TYPES:
        return payload, 1, False
    return int(BlockType.ERROR), 1, True


class Receiver:
    """Cycle-level model of ``pcs-rx``: call :meth:`step` once per clock with one raw
    66-bit chunk per physical lane (bit 0 first on the wire). Attributes after a step are
    the RTL's registers after that clock edge."""

    def __init__(self, n_lanes: int, am_period: int, max_skew: int, ber_window: int):
        check_params(n_lanes, am_period, max_skew, ber_window)
        self.n_lanes, self.am_period = n_lanes, am_period
        self.max_skew, self.ber_window = max_skew, ber_window
        n = n_lanes
        z = lambda v=0: [v] * n  # noqa: E731
        # stage 1: bit alignment and block lock
        self.prev, self.offset, self.lock = z(), z(), z()
        self.sh_cnt, self.sh_bad = z(), z()
        self.ber_cnt, self.ber_timer, self.hi_ber = z(), z(), z()
        self.slips = z()
        #: what the lock FSM did with the last header, per lane (for coverage): one of
        #: LOCK_EVENTS
        self.lock_event = z("none")
        self.b1, self.b1_ok = z(), z()
        # stage 2: marker lock, BIP
        self.am_state, self.am_lock, self.am_id = z(HUNT), z(), z()
        self.am_cnt, self.am_bad, self.bip_acc, self.bip_errors = z(), z(), z(), z()
        self.buf = [[0] * (max_skew + 1) for _ in range(n)]
        # alignment and output
        self.align, self.started, self.dcnt, self.delay = A_WAIT, z(), z(), z()
        self.row_cnt, self.primed, self.hist = 0, 0, 0
        # registered marker-row check: acted on in the cycle after the marker row
        self.chk_ok, self.chk_due = 0, 0
        # row register between reorder and descrambler (s_first: the priming row)
        self.s_valid, self.s_first, self.s_logical = 0, 0, [0] * n
        self.link_up = 0
        self.out_valid, self.out_words = 0, [(0, 0)] * n
        self.decode_errors = 0
        self.dec_row = 0      # ERROR blocks of the row on o_data, counted a cycle later
        self.align_failures = 0
        self.cycle = 0

    # combinational helpers
    def _ids_ok(self) -> bool:
        return sorted(self.am_id) == list(range(self.n_lanes))

    def step(self, chunks) -> None:
        n, P = self.n_lanes, self.am_period
        nx = {k: (list(v) if isinstance(v, list) else v) for k, v in vars(self).items()
              if k != "buf"}
        nbuf = [list(b) for b in self.buf]
        for p in range(n):
            x = int(chunks[p]) & M66
            blk = (((x << 66) | self.prev[p]) >> self.offset[p]) & M66
            nx["prev"][p] = x
            nx["b1"][p] = blk
            nx["b1_ok"][p] = self.lock[p]
            # -- block lock, Figure 49-12 collapsed to one header per cycle --
            valid = (blk & 3) in (SYNC_DATA, SYNC_CTRL)
            cnt = self.sh_cnt[p] + 1
            bad = self.sh_bad[p] + (0 if valid else 1)
            lock = self.lock[p]
            slip = False
            was = "locked" if lock else "hunt"
            if valid:
                event = f"{was}_valid"
                if cnt == LOCK_WINDOW:
                    event = "window_reset" if bad else ("window_good" if lock else "lock_gained")
                    if bad == 0:
                        lock = 1
                    cnt, bad = 0, 0
            else:
                event = f"{was}_invalid"
                if bad == LOCK_BAD or not self.lock[p]:
                    event = "lock_lost" if self.lock[p] else "hunt_slip"
                    slip, lock, cnt, bad = True, 0, 0, 0
                elif cnt == LOCK_WINDOW:
                    event = "window_reset"
                    cnt, bad = 0, 0
            nx["lock_event"][p] = event
            nx["sh_cnt"][p], nx["sh_bad"][p], nx["lock"][p] = cnt, bad, lock
            if slip:
                nx["offset"][p] = (self.offset[p] + 1) % 66
                nx["slips"][p] = min(self.slips[p] + 1, 0xFFFF)
            # -- BER monitor, Figure 49-13 (counts while block-locked) --
            if not self.lock[p]:
                nx["ber_cnt"][p], nx["ber_timer"][p], nx["hi_ber"][p] = 0, 0, 0
            else:
                c = min(self.ber_cnt[p] + (0 if valid else 1), HI_BER_LIMIT)
                if self.ber_timer[p] == self.ber_window - 1:
                    nx["ber_timer"][p], nx["ber_cnt"][p] = 0, 0
                    nx["hi_ber"][p] = int(c >= HI_BER_LIMIT)
                else:
                    nx["ber_timer"][p], nx["ber_cnt"][p] = self.ber_timer[p] + 1, c
                    nx["hi_ber"][p] = int(self.hi_ber[p] or c >= HI_BER_LIMIT)
            # -- marker lock and BIP on b1 --
            b = self.b1[p]
            mid = marker_id(b)
            st = self.am_state[p]
            nbuf[p] = [b] + self.buf[p][:-1]
            if not self.b1_ok[p]:
                nx["am_state"][p], nx["am_lock"][p], nx["am_bad"][p] = HUNT, 0, 0
            elif st == HUNT:
                if mid is not None:
                    nx["am_state"][p], nx["am_id"][p] = CHECK, mid
                    nx["am_cnt"][p] = 1 % P
                    nx["bip_acc"][p] = _bip8_int(b)
            else:
                if self.am_cnt[p] == 0:
                    match = mid is not None and mid == self.am_id[p]
                    if st == LOCKED or match:
                        if ((b >> 26) & 0xFF) != self.bip_acc[p]:
                            nx["bip_errors"][p] = min(self.bip_errors[p] + 1, 0xFFFF)
                    nx["bip_acc"][p] = _bip8_int(b)
                    if st == CHECK:
                        if match:
                            nx["am_state"][p], nx["am_lock"][p], nx["am_bad"][p] = LOCKED, 1, 0
                        else:
                            nx["am_state"][p] = HUNT
                    else:
                        if match:
                            nx["am_bad"][p] = 0
                        elif self.am_bad[p] + 1 == AM_BAD_LIMIT:
                            nx["am_state"][p], nx["am_lock"][p], nx["am_bad"][p] = HUNT, 0, 0
                        else:
                            nx["am_bad"][p] = self.am_bad[p] + 1
                else:
                    nx["bip_acc"][p] = self.bip_acc[p] ^ _bip8_int(b)
                nx["am_cnt"][p] = (self.am_cnt[p] + 1) % P
        # -- lane alignment (deskew + reorder), global --
        all_ok = all(self.am_lock) and self._ids_ok()
        # output stage: descramble and decode the row registered by the alignment stage
        nx["out_valid"] = 0
        nx["dec_row"] = 0
        nx["decode_errors"] = min(self.decode_errors + self.dec_row, 0xFFFF)
        nx["s_valid"] = 0
        nx["chk_due"] = 0
        if self.s_valid:
            pays, hist = _desc_row([blk >> 2 for blk in self.s_logical], self.hist)
            nx["hist"] = hist
            if not self.s_first:
                words, errs = [], 0
                for blk, pay in zip(self.s_logical, pays):
                    d, c, e = decode(blk & 3, pay)
                    words.append((d, c))
                    errs += e
                nx["out_valid"], nx["out_words"], nx["dec_row"] = 1, words, errs
        if not all_ok:
            nx["align"], nx["primed"] = A_WAIT, 0
        elif self.align == A_WAIT:
            nx["align"], nx["started"], nx["dcnt"] = A_ARM, [0] * n, [0] * n
        elif self.align == A_ARM:
            abort = False
            for p in range(n):
                if self.started[p]:
                    nx["dcnt"][p] = self.dcnt[p] + 1
                    if self.dcnt[p] + 1 > self.max_skew:
                        abort = True
                elif self.am_state[p] == LOCKED and self.am_cnt[p] == 0:
                    nx["started"][p], nx["dcnt"][p] = 1, 0
            if abort:
                nx["align"] = A_WAIT
                nx["align_failures"] = min(self.align_failures + 1, 0xFFFF)
            elif all(nx["started"]):
                nx["align"], nx["delay"], nx["row_cnt"], nx["primed"] = \
                    A_RUN, list(nx["dcnt"]), 0, 0
        else:  # A_RUN
            row = [self.buf[p][self.delay[p]] for p in range(n)]
            nx["row_cnt"] = (self.row_cnt + 1) % P
            if self.row_cnt == 0:
                # marker row: dropped; the check is registered and acted on next cycle
                nx["chk_ok"] = int(all(marker_id(row[p]) == self.am_id[p] for p in range(n)))
                nx["chk_due"] = 1
            elif self.chk_due and not self.chk_ok:
                nx["align"], nx["primed"] = A_WAIT, 0
                nx["align_failures"] = min(self.align_failures + 1, 0xFFFF)
            else:
                logical = [0] * n
                for p in range(n):
                    logical[self.am_id[p]] = row[p]
                nx["s_valid"], nx["s_logical"] = 1, logical
                nx["s_first"] = int(not self.primed)
                nx["primed"] = 1
        nx["link_up"] = int(nx["align"] == A_RUN)
        for k, v in nx.items():
            setattr(self, k, v)
        self.buf = nbuf
        self.cycle += 1

    def run(self, chunk_rows):
        """Step over ``chunk_rows`` (cycles x lanes); returns the delivered words (in order)
        and per-cycle traces of ``lock``, ``am_lock`` and ``link_up``."""
        words, lock, am, up = [], [], [], []
        for row in chunk_rows:
            self.step(row)
            if self.out_valid:
                words.extend(self.out_words)
            lock.append(list(self.lock))
            am.append(list(self.am_lock))
            up.append(self.link_up)
        return {"words": words, "lock": np.array(lock), "am_lock": np.array(am),
                "link_up": np.array(up)}


# -- vectors --------------------------------------------------------------------------------
def _int_param(params: dict, key: str, default: int) -> int:
    try:
        return int(params.get(key, str(default)), 0)
    except ValueError:
        raise ValueError(f"{key}={params[key]!r} is not an integer") from None


def random_rows(rng: np.random.Generator, n_rows: int, n_lanes: int,
                p_ctrl: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Random words: data with probability ``1 - p_ctrl``, else a control word of a random
    known type (random body, except IDLE whose body is zero)."""
    total = n_rows * n_lanes
    data = rng.integers(0, 1 << 63, size=total, dtype=np.uint64) * np.uint64(2) \
        + rng.integers(0, 2, size=total, dtype=np.uint64)
    ctrl = rng.random(total) < p_ctrl
    kinds = rng.choice(np.array(KNOWN_TYPES, dtype=np.uint64), size=total)
    body = data >> np.uint64(8)
    body = np.where(kinds == np.uint64(BlockType.IDLE), np.uint64(0), body)
    data = np.where(ctrl, (body << np.uint64(8)) | kinds, data)
    return data.astype(np.uint64), ctrl


def _vectors_pcs(params: dict, seed: int, count: int) -> dict:
    known = {"n_lanes", "am_period", "rows", "serdes_width"}
    for key in params:
        if key not in known:
            raise ValueError(f"unknown parameter {key!r} (known: {', '.join(sorted(known))})")
    n_lanes = _int_param(params, "n_lanes", 4)
    am_period = _int_param(params, "am_period", 16)
    rows = _int_param(params, "rows", 40)
    width = _int_param(params, "serdes_width", 66)
    check_params(n_lanes, am_period)
    check_serdes_width(width)
    if rows < 1:
        raise ValueError(f"rows={rows} must be positive")
    rng = np.random.default_rng(seed)
    vectors = []
    for _ in range(count):
        data, ctrl = random_rows(rng, rows, n_lanes)
        tx = transmit(data, ctrl, n_lanes, am_period)
        vectors.append({
            "words": [{"data": f"{int(d):016x}", "ctrl": int(c)} for d, c in zip(data, ctrl)],
            "lanes": [[f"{b:017x}" for b in tx.blocks(k)] for k in range(n_lanes)],
            "marker_rows": [int(i) for i in np.flatnonzero(tx.is_marker)],
        })
        if width != 66:
            vectors[-1]["serdes_words"] = [[f"{w:0{(width + 3) // 4}x}" for w in
                                            serialize(tx.blocks(k), width)]
                                           for k in range(n_lanes)]
    return {"params": {"n_lanes": n_lanes, "am_period": am_period, "rows": rows,
                       "serdes_width": width,
                       "scrambler_init": f"{SCRAMBLER_INIT:x}",
                       "block_format": "66-bit hex, bit 0 first on the wire: bits 1:0 sync "
                                       "(2 data, 1 control), bits 65:2 payload",
                       "first_row": "alignment markers (reset state)",
                       "serdes_words": "only for serdes_width < 66: each lane's block "
                                       "stream cut into W-bit words, bit 0 first"},
            "vectors": vectors}


VECTORS = {"pcs": _vectors_pcs}
