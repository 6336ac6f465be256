"""Clause-49 (10GBASE-R) profile of the 64b/66b PCS: one lane, no alignment markers, the
block type codes of IEEE 802.3 Figure 49-7 and an XGMII-style client.

- :class:`Cl49Tx` (block ``pcs-cl49-tx``): T_TYPE classification, transmit state machine
  (Figure 49-14), ENCODE, scrambler, :class:`~rtl.pcs.gearbox.TxGearbox`.
- :class:`Cl49Rx` (block ``pcs-cl49-rx``): :class:`~rtl.pcs.gearbox.RxGearbox`,
  :class:`~rtl.pcs.lock.BlockLock` (Figure 49-12 lock, Figure 49-13 BER monitor),
  descrambler, R_TYPE with one block of look-ahead, receive state machine (Figure 49-15),
  DECODE.

Formats and constants: :mod:`fusionfabric.formats.pcs_cl49`; golden model (bit- and
cycle-exact): :mod:`fusionfabric.sim.pcs_cl49`; description: ``docs/pcs.md``, "Clause-49
profile".
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, EnableInserter, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.pcs import SCRAMBLER_INIT, SYNC_CTRL, SYNC_DATA
from fusionfabric.formats.pcs_cl49 import (CODE_TO_XGMII, ERROR_VECTOR, IDLE_VECTOR, LF_VECTOR,
                                           TERMINATE, XGMII, XGMII_TO_CODE, BlockType, Code,
                                           OCode, Xgmii, check_cl49_params)

from .common import descramble64, scramble64
from .gearbox import RxGearbox, TxGearbox
from .lock import BlockLock

__all__ = ["Cl49Tx", "Cl49Rx"]

INIT, C, D, T, E = 0, 1, 2, 3, 4
#: EBLOCK_T / the payload of a 0x1E block of eight /E/ codes.
EBLOCK = int(BlockType.CTRL) | sum(int(Code.ERROR) << (8 + 7 * k) for k in range(8))


def _any_of(v: Value, table) -> Value:
    return Cat(*[v == int(x) for x in table]).any()


def _lookup(v: Value, table: dict, default: int, width: int) -> Value:
    out = Const(default, width)
    for k, x in table.items():
        out = Mux(v == k, x, out)
    return out


def _next_state(m, state, kc, ks, kt, kd, t_ok, name):
    """The next state of Figures 49-14/49-15 for a vector/block of kind C/S/T/D (else E);
    ``t_ok``: a T block may end a frame (always on the transmit side; on the receive side
    when the next block is S or C)."""
    ns = Signal(3, name=name)
    tt = kt & t_ok
    with m.Switch(state):
        with m.Case(D):
            m.d.comb += ns.eq(Mux(kd, D, Mux(tt, T, E)))
        with m.Case(E):
            m.d.comb += ns.eq(Mux(kc, C, Mux(kd | ks, D, Mux(tt, T, E))))
        with m.Default():                         # INIT, C, T
            m.d.comb += ns.eq(Mux(kc, C, Mux(ks, D, E)))
    return ns


class Cl49Tx(wiring.Component):
    """Encode XGMII vectors into clause-49 66-bit blocks, scramble, and send them on one lane.

    Each vector is typed (T_TYPE: C, S, T, D or E) and steps the transmit state machine
    (Figure 49-14: INIT/C/T: C→C, S→D, else E; D: D→D, T→T, else E; E: C→C, D→D, S→D,
    T→T, E→E). In states C, D and T the block is ENCODE(vector) per Figure 49-7; in state E
    it is EBLOCK_T (a 0x1E block of eight /E/ codes, counted). The payload is scrambled with
    G(x) = 1 + x^39 + x^58 (state all ones after reset); the sync header is not. Bit-exact
    with :func:`fusionfabric.sim.pcs_cl49.transmit`.

    Parameters
    ----------
    serdes_width : int
        Bits per cycle on ``o_lane``: 66 (one block per cycle) or 32/64 through a
        :class:`~rtl.pcs.gearbox.TxGearbox` (``o_lane`` is the next W bits of the block
        stream, :func:`fusionfabric.sim.pcs.serialize`).

    Members
    -------
    i_xgmii : In(stream.Signature(XGMII))
        Client vectors: ``data`` (octet ``k`` = lane ``k``, octet 0 first) and ``ctrl``
        (one flag per octet). Taken in the cycles where ``ready`` is high (every cycle at
        W = 66, the gearbox's row cycles at W = 32/64); a row cycle without ``valid`` sends
        eight /I/.
    o_lane : Out(serdes_width)
        Line bits, bit 0 first on the wire.
    o_encode_errors : Out(16)
        EBLOCK_T sent (saturating).

    Timing
    ------
    A vector accepted at cycle ``t`` is on ``o_lane`` at ``t + 1`` (W = 66); at W = 32/64
    its first bit is at ``t + 1`` and its last at ``t + 2`` (W = 64) or ``t + 3`` (W = 32)
    (the gearbox's timing). Reset: state INIT, scrambler all ones, gearbox empty.
    """

    def __init__(self, serdes_width: int = 66):
        check_cl49_params(serdes_width)
        self.serdes_width = serdes_width
        super().__init__({
            "i_xgmii": In(stream.Signature(XGMII.layout())),
            "o_lane": Out(serdes_width),
            "o_encode_errors": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        gb = m.submodules.gearbox = TxGearbox(1, self.serdes_width)
        advance = gb.o_take
        take = Signal()
        m.d.comb += [self.i_xgmii.ready.eq(advance), take.eq(self.i_xgmii.valid & advance),
                     self.o_lane.eq(gb.o_lanes[0])]
        d = Signal(64)
        c = Signal(8)
        m.d.comb += [d.eq(Mux(take, self.i_xgmii.payload.data, IDLE_VECTOR[0])),
                     c.eq(Mux(take, self.i_xgmii.payload.ctrl, IDLE_VECTOR[1]))]
        o = [d[8 * k:8 * k + 8] for k in range(8)]
        f = [c[k] for k in range(8)]
        code = [_lookup(o[k], XGMII_TO_CODE, int(Code.ERROR), 7) for k in range(8)]
        code_ok = Signal(8)
        m.d.comb += code_ok.eq(Cat(*[f[k] & _any_of(o[k], XGMII_TO_CODE) for k in range(8)]))
        os_ = {k: f[k] & _any_of(o[k], (Xgmii.SEQ_OS, Xgmii.SIG_OS)) & ~c[k + 1:k + 4].any()
               for k in (0, 4)}
        oc = {k: Mux(o[k] == Xgmii.SIG_OS, int(OCode.SIG), int(OCode.SEQ)) for k in (0, 4)}
        no_err = ~Cat(*[o[k] == Xgmii.ERROR for k in range(8)]).any()
        lo, hi = code_ok[0:4].all(), code_ok[4:8].all()
        zero4 = Const(0, 4)
        # (condition, sync, payload) in the model's priority order
        cases = [
            ("D", c == 0, d),
            ("C", code_ok.all() & no_err, Cat(Const(BlockType.CTRL, 8), *code)),
            ("C", os_[0] & hi, Cat(Const(BlockType.OS_0, 8), *o[1:4], oc[0], *code[4:8])),
            ("C", lo & os_[4], Cat(Const(BlockType.OS_4, 8), *code[0:4], oc[4], *o[5:8])),
            ("C", os_[0] & os_[4],
             Cat(Const(BlockType.OS_04, 8), *o[1:4], oc[0], oc[4], *o[5:8])),
            ("S", f[0] & (o[0] == Xgmii.START) & ~c[1:8].any(),
             Cat(Const(BlockType.START_0, 8), *o[1:8])),
        ]
        s4 = f[4] & (o[4] == Xgmii.START) & ~c[5:8].any()
        cases += [
            ("S", s4 & lo, Cat(Const(BlockType.START_4, 8), *code[0:4], zero4, *o[5:8])),
            ("S", s4 & os_[0],
             Cat(Const(BlockType.OS_START, 8), *o[1:4], oc[0], zero4, *o[5:8])),
        ]
        for k in range(8):
            cond = f[k] & (o[k] == Xgmii.TERMINATE) & (c[:k] == 0 if k else 1) \
                & (code_ok[k + 1:8].all() if k < 7 else 1)
            parts = [Const(TERMINATE[k], 8), *o[:k]]
            if k < 7:
                parts += [Const(0, 7 - k), *code[k + 1:8]]
            cases.append(("T", cond, Cat(*parts)))
        kinds = {x: Signal(name=f"kind_{x}") for x in "CSTD"}
        payload = Signal(64)
        hits = [Signal(name=f"case{i}") for i in range(len(cases))]
        for i, (_, cond, _) in enumerate(cases):
            m.d.comb += hits[i].eq(cond)
        first = Const(0, 1)
        for i, (kind, _, pay) in enumerate(cases):
            sel = hits[i] & ~first
            with m.If(sel):
                m.d.comb += [payload.eq(pay), kinds[kind].eq(1)]
            first = first | hits[i]
        state = Signal(3, init=INIT)
        ns = _next_state(m, state, kinds["C"], kinds["S"], kinds["T"], kinds["D"], 1, "tx_next")
        word = Signal(64)
        sync = Signal(2)
        m.d.comb += [
            word.eq(Mux(ns == E, EBLOCK, payload)),
            sync.eq(Mux(kinds["D"] & (ns == D), SYNC_DATA, SYNC_CTRL)),
        ]
        scr_state = Signal(58, init=SCRAMBLER_INIT)
        out, scr_next = scramble64(scr_state, word)
        m.d.comb += gb.i_blocks[0].eq(Cat(sync, out))
        with m.If(advance):
            m.d.sync += [state.eq(ns), scr_state.eq(scr_next)]
            with m.If((ns == E) & (self.o_encode_errors != 0xFFFF)):
                m.d.sync += self.o_encode_errors.eq(self.o_encode_errors + 1)
        return m


def _r_type(m, sync: Value, p: Value, name: str):
    """R_TYPE of a descrambled block: (is_C, is_S, is_T, is_D) signals (none: E)."""
    t = p[0:8]
    code = [p[8 + 7 * k:15 + 7 * k] for k in range(8)]
    vc = Signal(8, name=f"{name}_code_ok")
    m.d.comb += vc.eq(Cat(*[_any_of(code[k], CODE_TO_XGMII) for k in range(8)]))

    def vo(bit):
        return (p[bit:bit + 4] == OCode.SEQ) | (p[bit:bit + 4] == OCode.SIG)

    ctl = sync == SYNC_CTRL
    no_err = ~Cat(*[code[k] == Code.ERROR for k in range(8)]).any()
    is_c = ctl & (((t == BlockType.CTRL) & vc.all() & no_err)
                  | ((t == BlockType.OS_4) & vc[0:4].all() & vo(36))
                  | ((t == BlockType.OS_0) & vo(32) & vc[4:8].all())
                  | ((t == BlockType.OS_04) & vo(32) & vo(36)))
    is_s = ctl & (((t == BlockType.START_4) & vc[0:4].all())
                  | ((t == BlockType.OS_START) & vo(32)) | (t == BlockType.START_0))
    is_t = ctl & Cat(*[(t == TERMINATE[k]) & (vc[k + 1:8].all() if k < 7 else 1)
                       for k in range(8)]).any()
    out = [Signal(name=f"{name}_is_{x}") for x in "CSTD"]
    m.d.comb += [out[0].eq(is_c), out[1].eq(is_s), out[2].eq(is_t),
                 out[3].eq(sync == SYNC_DATA)]
    return out


def _decode(m, sync: Value, p: Value, name: str):
    """DECODE of a block of type C, S, T or D: ``(data, ctrl)`` signals (Figure 49-7
    backwards; anything else gives eight /E/)."""
    o = [Signal(8, name=f"{name}_o{k}") for k in range(8)]
    f = Signal(8, name=f"{name}_f")
    octet = [p[8 * k:8 * k + 8] for k in range(8)]
    xc = [_lookup(p[8 + 7 * k:15 + 7 * k], CODE_TO_XGMII, int(Xgmii.ERROR), 8)
          for k in range(8)]

    def oset(bit):
        return Mux(p[bit:bit + 4] == OCode.SIG, int(Xgmii.SIG_OS), int(Xgmii.SEQ_OS))

    def put(lanes, vals):
        m.d.comb += [o[k].eq(v) for k, v in zip(lanes, vals)]

    d1, d5 = (1, 2, 3), (5, 6, 7)
    with m.If(sync == SYNC_DATA):
        put(range(8), octet)
        m.d.comb += f.eq(0)
    with m.Else():
        with m.Switch(p[0:8]):
            with m.Case(BlockType.CTRL):
                put(range(8), xc)
                m.d.comb += f.eq(0xFF)
            with m.Case(BlockType.OS_4):
                put(range(4), xc[0:4]), put([4], [oset(36)]), put(d5, octet[5:8])
                m.d.comb += f.eq(0x1F)
            with m.Case(BlockType.OS_0):
                put([0], [oset(32)]), put(d1, octet[1:4]), put(range(4, 8), xc[4:8])
                m.d.comb += f.eq(0xF1)
            with m.Case(BlockType.OS_04):
                put([0], [oset(32)]), put(d1, octet[1:4]), put([4], [oset(36)])
                put(d5, octet[5:8])
                m.d.comb += f.eq(0x11)
            with m.Case(BlockType.START_4):
                put(range(4), xc[0:4]), put([4], [Xgmii.START]), put(d5, octet[5:8])
                m.d.comb += f.eq(0x1F)
            with m.Case(BlockType.OS_START):
                put([0], [oset(32)]), put(d1, octet[1:4]), put([4], [Xgmii.START])
                put(d5, octet[5:8])
                m.d.comb += f.eq(0x11)
            with m.Case(BlockType.START_0):
                put([0], [Xgmii.START]), put(range(1, 8), octet[1:8])
                m.d.comb += f.eq(0x01)
            for k in range(8):
                with m.Case(TERMINATE[k]):
                    put(range(k), octet[1:k + 1]), put([k], [Xgmii.TERMINATE])
                    put(range(k + 1, 8), xc[k + 1:8])
                    m.d.comb += f.eq((0xFF << k) & 0xFF)
            with m.Default():
                put(range(8), [Xgmii.ERROR] * 8)
                m.d.comb += f.eq(0xFF)
    return Cat(*o), f


class Cl49Rx(wiring.Component):
    """Receive one clause-49 lane and deliver XGMII vectors.

    Pipeline (W = 66): :class:`BlockLock` cuts and locks the block (registered), the
    descrambler runs on every block into the block register ``cur`` (with ``ok`` = block
    lock and not hi_ber), the receive state machine (Figure 49-15) decides ``cur`` with the
    following block's R_TYPE as R_TYPE_NEXT, and the vector is registered on ``o_xgmii``:
    DECODE(cur) in states C, D and T, eight /E/ in state E (counted), a local-fault
    ordered set (LBLOCK_R) and state INIT when ``cur`` was not ``ok``. States: INIT/C/T:
    C→C, S→D, else E; D: D→D, T→T if next is S or C, else E; E: C→C, D→D, S→D, T→T if next
    is S or C, else E. Bit- and cycle-exact with :class:`fusionfabric.sim.pcs_cl49.Receiver`
    (:class:`~fusionfabric.sim.pcs_cl49.GearboxReceiver` at W = 32/64).

    Parameters
    ----------
    ber_window : int
        BER monitor window in blocks (19531 = 125 us at 10.3125 GBd).
    serdes_width : int
        Bits per cycle on ``i_lane``: 66, or 32/64 through a :class:`RxGearbox` whose
        chunks clock-enable the 66-bit receiver (counts stay in blocks).

    Members
    -------
    i_lane : In(serdes_width)
        Raw, unaligned line bits, bit 0 first.
    o_xgmii : Out(Signature(payload=XGMII, valid=1))
        An always-ready stream of vectors (one per block).
    o_block_lock, o_hi_ber : Out(1)
        Block lock and high-BER flag.
    o_slips, o_decode_errors : Out(16)
        Bit slips and vectors delivered as eight /E/ in state E (saturating).

    Timing
    ------
    A block whose last bit is on ``i_lane`` at cycle ``t`` is delivered at ``t + 3``
    (W = 66: block lock register, block register, output register; the look-ahead block
    is the one behind it). Reset: unlocked, state INIT, ``o_xgmii`` carries LBLOCK_R once
    valid. With a gearbox the receiver runs in the cycles after the gearbox loaded a
    chunk, and ``o_xgmii.valid`` is high only in the cycle after such an edge.
    """

    def __init__(self, ber_window: int = 19531, serdes_width: int = 66):
        check_cl49_params(serdes_width, ber_window)
        self.ber_window = ber_window
        self.serdes_width = serdes_width
        super().__init__({
            "i_lane": In(serdes_width),
            "o_xgmii": Out(wiring.Signature({"payload": Out(XGMII.layout()),
                                             "valid": Out(1)})),
            "o_block_lock": Out(1),
            "o_hi_ber": Out(1),
            "o_slips": Out(16),
            "o_decode_errors": Out(16),
        })

    def elaborate(self, platform):
        if self.serdes_width != 66:
            return self._elaborate_gearbox()
        m = Module()
        bl = m.submodules.lock = BlockLock(self.ber_window)
        m.d.comb += [bl.i_chunk.eq(self.i_lane), self.o_block_lock.eq(bl.o_lock),
                     self.o_hi_ber.eq(bl.o_hi_ber), self.o_slips.eq(bl.o_slips)]
        hist = Signal(58)
        b1 = bl.o_block
        pay, hist_next = descramble64(hist, b1[2:66])
        nxt = Signal(66)
        m.d.comb += nxt.eq(Cat(b1[0:2], pay))
        cur = Signal(66)
        cur_ok = Signal()
        m.d.sync += [hist.eq(hist_next), cur.eq(nxt), cur_ok.eq(bl.o_ok & ~bl.o_hi_ber)]
        kc, ks, kt, kd = _r_type(m, cur[0:2], cur[2:66], "cur")
        nc, ns_, _, _ = _r_type(m, nxt[0:2], nxt[2:66], "next")
        dec_d, dec_c = _decode(m, cur[0:2], cur[2:66], "dec")
        state = Signal(3, init=INIT)
        ns = _next_state(m, state, kc, ks, kt, kd, nc | ns_, "rx_next")
        out = self.o_xgmii.payload
        m.d.sync += self.o_xgmii.valid.eq(1)
        with m.If(~cur_ok):
            m.d.sync += [state.eq(INIT), out.data.eq(LF_VECTOR[0]), out.ctrl.eq(LF_VECTOR[1])]
        with m.Else():
            m.d.sync += state.eq(ns)
            with m.If(ns == E):
                m.d.sync += [out.data.eq(ERROR_VECTOR[0]), out.ctrl.eq(ERROR_VECTOR[1])]
                with m.If(self.o_decode_errors != 0xFFFF):
                    m.d.sync += self.o_decode_errors.eq(self.o_decode_errors + 1)
            with m.Else():
                m.d.sync += [out.data.eq(dec_d), out.ctrl.eq(dec_c)]
        return m

    def _elaborate_gearbox(self):
        m = Module()
        gb = m.submodules.gearbox = RxGearbox(1, self.serdes_width)
        core = Cl49Rx(self.ber_window)
        m.submodules.core = EnableInserter(gb.o_valid)(core)
        stepped = Signal()
        m.d.sync += stepped.eq(gb.o_valid)
        m.d.comb += [
            gb.i_lanes[0].eq(self.i_lane), core.i_lane.eq(gb.o_chunks[0]),
            self.o_xgmii.payload.eq(core.o_xgmii.payload),
            self.o_xgmii.valid.eq(core.o_xgmii.valid & stepped),
            self.o_block_lock.eq(core.o_block_lock), self.o_hi_ber.eq(core.o_hi_ber),
            self.o_slips.eq(core.o_slips), self.o_decode_errors.eq(core.o_decode_errors),
        ]
        return m
