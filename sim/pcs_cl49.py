"""Clause-49 (10GBASE-R) profile of the 64b/66b PCS: golden model, pure numpy/Python.

One lane, no alignment markers, the block formats of IEEE 802.3 Figure 49-7 and an
XGMII-style client (:data:`fusionfabric.formats.pcs_cl49.XGMII`: 64 data bits + 8 control
flags per vector, octet 0 first).

Transmit (:func:`transmit`): each vector is classified (``T_TYPE``, cl. 49.2.13.2.3):

- ``D``: eight data octets;
- ``C``: eight valid control characters other than /O/ /S/ /T/ /E/; or one ordered set
  (/O/ or /Fsig/ in lane 0 or 4 followed by three data octets) and four valid control
  characters other than /O/ /S/ /T/; or two ordered sets;
- ``S``: /S/ in lane 0 followed by data, or /S/ in lane 4 followed by data with valid
  control characters or an ordered set in lanes 0..3;
- ``T``: /T/ in lane k, data before it, valid control characters other than /O/ /S/ /T/
  after it;
- ``E``: anything else.

The transmit state machine (Figure 49-14, one transition per vector) sends ``ENCODE(vector)``
in states C, D and T and EBLOCK_T (a 0x1E block of eight /E/ codes) in state E:
INIT/C/T: C→C, S→D, else E; D: D→D, T→T, else E; E: C→C, D→D, T→T, S→D, E→E. The
payloads are scrambled with the project's cl. 49 scrambler (all ones after reset), sync
headers are not.

Receive (:class:`Receiver`): block lock and BER monitor of the multi-lane PCS (one lane of
:class:`fusionfabric.sim.pcs.Receiver`'s first stage, i.e. :class:`BlockLock`), the
descrambler, then the receive state machine (Figure 49-15) with one block of look-ahead:
each block is typed (``R_TYPE``: C, S, T, D or E, checking the block type field, the 7-bit
codes and the O codes) and INIT/C/T: C→C, S→D, else E; D: D→D, T→T if the next block is S
or C, else E; E: C→C, D→D, S→D, T→T if the next block is S or C, else E. States C, D and T
deliver ``DECODE(block)``, state E delivers EBLOCK_R (eight /E/); without block lock or with
hi_ber the receiver is in INIT and delivers LBLOCK_R (a local-fault ordered set). The model
is cycle-exact with ``pcs-cl49-rx``: attributes after :meth:`Receiver.step` equal the RTL's
registers after the same clock edge.

Reading of the standard: the exits of the E states on an S vector/block (to D) are this
model's reading of Figures 49-14/49-15; reserved bits (the pads of T blocks and of 0x33 /
0x66) are sent as 0 and not checked.
"""

from __future__ import annotations

import numpy as np

from fusionfabric.formats.pcs import M66, SCRAMBLER_INIT, SYNC_CTRL, SYNC_DATA
from fusionfabric.formats.pcs_cl49 import (CODE_TO_XGMII, ERROR_VECTOR, IDLE_VECTOR, LF_VECTOR,
                                           TERMINATE, XGMII_TO_CODE, BlockType, Code, OCode,
                                           Xgmii, check_cl49_params)
from fusionfabric.sim import pcs as _pcs

__all__ = ["t_type", "encode_vector", "encode", "transmit", "r_type", "decode_block",
           "decode", "Receiver", "make_receiver", "EBLOCK_T", "TX_STATES", "RX_STATES",
           "IDLE_VECTOR", "ERROR_VECTOR", "LF_VECTOR"]

INIT, C, D, T, E = 0, 1, 2, 3, 4
TX_STATES = RX_STATES = ("INIT", "C", "D", "T", "E")
_KIND = {"C": C, "S": D, "D": D, "T": T, "E": E}

#: EBLOCK_T: control block, type 0x1E, eight /E/ codes (sync excluded).
EBLOCK_T = int(BlockType.CTRL) | sum(int(Code.ERROR) << (8 + 7 * k) for k in range(8))
_OS = (int(Xgmii.SEQ_OS), int(Xgmii.SIG_OS))


def _octets(data: int, ctrl: int):
    return [(int(data) >> 8 * k) & 0xFF for k in range(8)], [(int(ctrl) >> k) & 1 for k in range(8)]


def _code(o, f, k):
    """Lane k holds a valid control character other than /O/ /S/ /T/."""
    return f[k] and o[k] in XGMII_TO_CODE


def _os(o, f, k):
    """An ordered set starts in lane k (0 or 4): /O/ or /Fsig/ then three data octets."""
    return f[k] and o[k] in _OS and not any(f[k + 1:k + 4])


def _ocode(x):
    return int(OCode.SIG) if x == Xgmii.SIG_OS else int(OCode.SEQ)


def _codes(o, lanes):
    return sum(XGMII_TO_CODE[o[k]] << (8 + 7 * k) for k in lanes)


def _dat(o, lanes, shift=0):
    """Data octets of ``lanes`` at payload octet ``lane + shift``."""
    return sum(o[k] << 8 * (k + shift) for k in lanes)


def encode_vector(data: int, ctrl: int) -> tuple[str, int]:
    """``(T_TYPE, payload)`` of one vector; the payload (unscrambled) per Figure 49-7, or
    :data:`EBLOCK_T` for type ``E`` (and for ``D`` the data itself)."""
    o, f = _octets(data, ctrl)
    if not any(f):
        return "D", int(data)
    hi, lo = range(4, 8), range(0, 4)
    if all(_code(o, f, k) for k in range(8)) and Xgmii.ERROR not in o:
        return "C", BlockType.CTRL | _codes(o, range(8))
    if _os(o, f, 0) and all(_code(o, f, k) for k in hi):
        return "C", BlockType.OS_0 | _dat(o, (1, 2, 3)) | _ocode(o[0]) << 32 | _codes(o, hi)
    if all(_code(o, f, k) for k in lo) and _os(o, f, 4):
        return "C", BlockType.OS_4 | _codes(o, lo) | _ocode(o[4]) << 36 | _dat(o, (5, 6, 7))
    if _os(o, f, 0) and _os(o, f, 4):
        return "C", (BlockType.OS_04 | _dat(o, (1, 2, 3)) | _ocode(o[0]) << 32
                     | _ocode(o[4]) << 36 | _dat(o, (5, 6, 7)))
    if f[0] and o[0] == Xgmii.START and not any(f[1:]):
        return "S", BlockType.START_0 | _dat(o, range(1, 8))
    if f[4] and o[4] == Xgmii.START and not any(f[5:]):
        if all(_code(o, f, k) for k in lo):
            return "S", BlockType.START_4 | _codes(o, lo) | _dat(o, (5, 6, 7))
        if _os(o, f, 0):
            return "S", (BlockType.OS_START | _dat(o, (1, 2, 3)) | _ocode(o[0]) << 32
                         | _dat(o, (5, 6, 7)))
    for k in range(8):
        if f[k] and o[k] == Xgmii.TERMINATE and not any(f[:k]) \
                and all(_code(o, f, i) for i in range(k + 1, 8)):
            return "T", TERMINATE[k] | _dat(o, range(k), 1) | _codes(o, range(k + 1, 8))
    return "E", EBLOCK_T


def t_type(data: int, ctrl: int) -> str:
    """``T_TYPE`` of a vector: one of ``C S T D E``."""
    return encode_vector(data, ctrl)[0]


def _tx_next(state: int, kind: str) -> int:
    if state in (INIT, C, T):
        return {"C": C, "S": D}.get(kind, E)
    if state == D:
        return {"D": D, "T": T}.get(kind, E)
    return _KIND[kind]             # E: C→C, D→D, T→T, S→D, E→E


def encode(data, ctrl, state: int = INIT) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Run the transmit state machine over vectors: ``(sync, payload, state, errors)``
    with the unscrambled payloads, the state after the last vector and the number of
    EBLOCK_T sent."""
    data = np.asarray(data, dtype=np.uint64).reshape(-1)
    ctrl = np.asarray(ctrl, dtype=np.uint8).reshape(-1)
    if data.shape != ctrl.shape:
        raise ValueError(f"{data.size} data words and {ctrl.size} ctrl flags: need equal lengths")
    sync = np.zeros(data.size, np.uint8)
    pay = np.zeros(data.size, np.uint64)
    errors = 0
    for i, (d, c) in enumerate(zip(data, ctrl)):
        kind, p = encode_vector(int(d), int(c))
        state = _tx_next(state, kind)
        if state == E:
            p, errors = EBLOCK_T, errors + 1
        sync[i] = SYNC_DATA if kind == "D" and state == D else SYNC_CTRL
        pay[i] = p
    return sync, pay, state, errors


def transmit(data, ctrl, state: int = INIT, scrambler: int = SCRAMBLER_INIT):
    """Encode and scramble vectors as ``pcs-cl49-tx`` sends them: ``(blocks, state,
    scrambler, errors)`` with ``blocks`` the 66-bit line blocks (bit 0 first)."""
    sync, pay, state, errors = encode(data, ctrl, state)
    scr, scrambler = _pcs.scramble(pay, scrambler)
    blocks = [int(s) | int(p) << 2 for s, p in zip(sync, scr)]
    return blocks, state, scrambler, errors


# -- receive --------------------------------------------------------------------------------
def _valid_codes(p: int, lanes) -> bool:
    return all(((p >> (8 + 7 * k)) & 0x7F) in CODE_TO_XGMII for k in lanes)


def _valid_o(p: int, bit: int) -> bool:
    return ((p >> bit) & 0xF) in (OCode.SEQ, OCode.SIG)


def r_type(sync: int, payload: int) -> str:
    """``R_TYPE`` of a descrambled block: one of ``C S T D E``."""
    if sync == SYNC_DATA:
        return "D"
    if sync != SYNC_CTRL:
        return "E"
    p, t = int(payload), int(payload) & 0xFF
    lo, hi = range(0, 4), range(4, 8)
    if t == BlockType.CTRL:
        ok = _valid_codes(p, range(8)) and all(
            ((p >> (8 + 7 * k)) & 0x7F) != Code.ERROR for k in range(8))
        return "C" if ok else "E"
    if t == BlockType.OS_4:
        return "C" if _valid_codes(p, lo) and _valid_o(p, 36) else "E"
    if t == BlockType.OS_0:
        return "C" if _valid_o(p, 32) and _valid_codes(p, hi) else "E"
    if t == BlockType.OS_04:
        return "C" if _valid_o(p, 32) and _valid_o(p, 36) else "E"
    if t == BlockType.START_4:
        return "S" if _valid_codes(p, lo) else "E"
    if t == BlockType.OS_START:
        return "S" if _valid_o(p, 32) else "E"
    if t == BlockType.START_0:
        return "S"
    if t in TERMINATE:
        k = TERMINATE.index(t)
        return "T" if _valid_codes(p, range(k + 1, 8)) else "E"
    return "E"


def decode_block(sync: int, payload: int) -> tuple[int, int]:
    """``DECODE`` (Figure 49-7 read backwards): the vector ``(data, ctrl)`` of a block of
    type C, S, T or D. Bits that a format does not carry are ignored."""
    p = int(payload)
    if sync == SYNC_DATA:
        return p, 0
    t = p & 0xFF
    octet = [(p >> 8 * k) & 0xFF for k in range(8)]
    o, f = [0] * 8, [0] * 8

    def codes(lanes):
        for k in lanes:
            o[k], f[k] = CODE_TO_XGMII.get((p >> (8 + 7 * k)) & 0x7F, Xgmii.ERROR), 1

    def data(lanes, shift=0):
        for k in lanes:
            o[k] = octet[k + shift]

    def oset(k, bit):
        o[k] = Xgmii.SIG_OS if (p >> bit) & 0xF == OCode.SIG else Xgmii.SEQ_OS
        f[k] = 1

    lo, hi, d1, d5 = range(4), range(4, 8), (1, 2, 3), (5, 6, 7)
    if t == BlockType.CTRL:
        codes(range(8))
    elif t == BlockType.OS_4:
        codes(lo), oset(4, 36), data(d5)
    elif t == BlockType.OS_0:
        oset(0, 32), data(d1), codes(hi)
    elif t == BlockType.OS_04:
        oset(0, 32), data(d1), oset(4, 36), data(d5)
    elif t == BlockType.START_4:
        codes(lo), data(d5)
        o[4], f[4] = Xgmii.START, 1
    elif t == BlockType.OS_START:
        oset(0, 32), data(d1), data(d5)
        o[4], f[4] = Xgmii.START, 1
    elif t == BlockType.START_0:
        data(range(1, 8))
        o[0], f[0] = Xgmii.START, 1
    elif t in TERMINATE:
        k = TERMINATE.index(t)
        data(range(k), 1)
        o[k], f[k] = Xgmii.TERMINATE, 1
        codes(range(k + 1, 8))
    else:
        return ERROR_VECTOR
    return (sum(int(x) << 8 * k for k, x in enumerate(o)), sum(x << k for k, x in enumerate(f)))


def _rx_next(state: int, kind: str, nxt: str) -> int:
    if state in (INIT, C, T):
        return {"C": C, "S": D}.get(kind, E)
    if kind == "T":
        return T if nxt in ("S", "C") else E
    if state == D:
        return D if kind == "D" else E
    return _KIND[kind]             # E: C→C, D→D, S→D, E→E (T above)


def decode(sync, payload, ok=None, state: int = INIT, last=None):
    """Run the receive state machine over descrambled blocks: returns ``(vectors, state,
    errors)``. ``ok[i]`` false (no block lock or hi_ber) delivers LBLOCK_R and goes to INIT.
    Block ``i`` is decided with block ``i + 1``; the last block needs ``last`` (its
    successor ``(sync, payload)``) or is not decoded."""
    n = len(sync)
    ok = [True] * n if ok is None else list(ok)
    kinds = [r_type(int(s), int(p)) for s, p in zip(sync, payload)]
    if last is not None:
        kinds.append(r_type(*last))
    out, errors = [], 0
    for i in range(min(n, len(kinds) - 1)):
        if not ok[i]:
            state = INIT
            out.append(LF_VECTOR)
            continue
        state = _rx_next(state, kinds[i], kinds[i + 1])
        if state == E:
            out.append(ERROR_VECTOR)
            errors += 1
        else:
            out.append(decode_block(int(sync[i]), int(payload[i])))
    return out, state, errors


class Receiver:
    """Cycle-level model of ``pcs-cl49-rx`` at ``serdes_width`` 66: call :meth:`step` once
    per clock with one raw (unaligned) 66-bit chunk. Pipeline: block lock (registered
    block ``b1`` and its lock flag), descrambler (combinational) into the block register
    ``cur`` (with ``ok`` = lock and not hi_ber), the receive state machine deciding ``cur``
    with the descrambled ``b1`` as R_TYPE_NEXT, and the output register (``out_data``,
    ``out_ctrl``, ``out_valid``)."""

    def __init__(self, ber_window: int = 19531):
        check_cl49_params(66, ber_window)
        self.ber_window = ber_window
        # the block-lock stage of the multi-lane receiver model, one lane
        self.lockm = _pcs.Receiver(1, 3, 0, ber_window)
        self.hist = 0
        self.cur, self.cur_ok = 0, 0
        self.state = INIT
        self.out_data, self.out_ctrl, self.out_valid = 0, 0, 0
        self.decode_errors = 0
        self.cycle = 0

    @property
    def lock(self):
        return self.lockm.lock[0]

    @property
    def hi_ber(self):
        return self.lockm.hi_ber[0]

    @property
    def slips(self):
        return self.lockm.slips[0]

    def step(self, chunk) -> None:
        lm = self.lockm
        b1, ok1, hib = lm.b1[0], lm.b1_ok[0], lm.hi_ber[0]
        (pay,), hist = _pcs.descramble([b1 >> 2], self.hist)
        nxt = (b1 & 3, pay)
        if not self.cur_ok:
            self.state = INIT
            self.out_data, self.out_ctrl = LF_VECTOR
        else:
            sync, p = self.cur & 3, self.cur >> 2
            self.state = _rx_next(self.state, r_type(sync, p), r_type(*nxt))
            if self.state == E:
                self.out_data, self.out_ctrl = ERROR_VECTOR
                self.decode_errors = min(self.decode_errors + 1, 0xFFFF)
            else:
                self.out_data, self.out_ctrl = decode_block(sync, p)
        self.out_valid = 1
        self.cur, self.cur_ok = nxt[0] | nxt[1] << 2, int(ok1 and not hib)
        self.hist = hist
        lm.step([int(chunk) & M66])
        self.cycle += 1

    def run(self, chunks):
        """Step over chunks; returns the delivered vectors ``(data, ctrl)`` in order."""
        out = []
        for c in chunks:
            self.step(c)
            if self.out_valid:
                out.append((self.out_data, self.out_ctrl))
        return out


class GearboxReceiver:
    """``pcs-cl49-rx`` with ``serdes_width`` 32/64: :class:`fusionfabric.sim.pcs.RxGearbox`
    then :class:`Receiver` stepped in the cycles where the gearbox had loaded a chunk (the
    RTL's clock enable); a vector is valid only in the cycle after an enabled edge."""

    def __init__(self, ber_window: int, serdes_width: int):
        check_cl49_params(serdes_width, ber_window)
        if serdes_width == 66:
            raise ValueError("serdes_width=66 has no gearbox: use Receiver")
        self.core = Receiver(ber_window)
        self.gearbox = _pcs.RxGearbox(1, serdes_width)
        self.out_valid = 0
        self.cycle = 0

    def __getattr__(self, name):
        return getattr(self.__dict__["core"], name)

    def step(self, word) -> None:
        stepped = bool(self.gearbox.valid)
        if stepped:
            self.core.step(self.gearbox.chunk[0])
        self.gearbox.step([word])
        self.out_valid = int(stepped and self.core.out_valid)
        self.cycle += 1

    def run(self, words):
        return Receiver.run(self, words)


def make_receiver(ber_window: int = 19531, serdes_width: int = 66):
    """The receiver model of a ``pcs-cl49-rx`` with these parameters."""
    check_cl49_params(serdes_width, ber_window)
    if serdes_width == 66:
        return Receiver(ber_window)
    return GearboxReceiver(ber_window, serdes_width)
