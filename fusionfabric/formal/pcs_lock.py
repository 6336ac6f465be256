"""PCS block lock (:class:`fusionfabric.rtl.pcs.lock.BlockLock`) against Figure 49-12.

The harness carries its own reference of IEEE 802.3 Figure 49-12 (lock state machine,
one sync header tested per cycle), with its own constants (:data:`GOOD_TO_LOCK` = 64
valid headers gain lock; :data:`BAD_TO_LOSE` = 16 invalid ones within a 64-header window
lose it), its own bit offset and its own previous-chunk register. The reference reads the
sync header of the block at *its* offset out of the free 66-bit input (``AnySeq``), so a
wrong offset in the RTL would make the two see different headers.

Properties (every cycle from reset, ``ber_window`` 4):

1. ``o_lock`` equals the reference's ``block_lock``;
2. ``o_offset`` equals the reference's offset (slips happen in the same cycles);
3. ``o_slips`` counts the reference's slips (saturating at 65535);
4. ``o_block`` is the block the reference cut out at its offset one cycle earlier, and
   ``o_ok`` the lock state it was tested under;
5. (refinement, white box) the RTL's ``sh_cnt`` and ``sh_bad`` equal the reference's
   ``sh_cnt`` and ``sh_invld_cnt``: this makes the comparison inductive (depth 2), where
   a black-box proof would need an induction deeper than the 64-header window.

Not covered: the BER monitor (``o_hi_ber``).

Covers: lock gained (64 cycles after reset at the earliest) and lock lost after it.

Planted bugs: ``bad-17``: the RTL is elaborated with ``LOCK_BAD`` = 17 (lock is lost after
17 invalid headers in a window, not 16); ``good-63``: the lock is declared one valid
header early (the RTL's window constant is 63 for the lock decision and the bad window).
"""

from __future__ import annotations

import contextlib

from amaranth.hdl import Assert, Assume, Cat, Cover, Elaboratable, Module, Mux, ResetSignal, Signal
from amaranth.asserts import AnySeq

import fusionfabric.rtl.pcs.lock as lock_mod
from fusionfabric.rtl.pcs.lock import BlockLock
from .flow import Harness, driven_signals, register

GOOD_TO_LOCK = 64
BAD_TO_LOSE = 16
BER_WINDOW = 4

PLANTED = {
    "bad-17": "elaborate BlockLock with LOCK_BAD = 17 (loses lock one invalid header late)",
    "good-63": "elaborate BlockLock with LOCK_WINDOW = 63 (locks one valid header early)",
}


@contextlib.contextmanager
def _constant(name, value):
    old = getattr(lock_mod, name)
    setattr(lock_mod, name, value)
    try:
        yield
    finally:
        setattr(lock_mod, name, old)


class LockHarness(Elaboratable):
    def __init__(self, planted: str | None = None):
        if planted is not None and planted not in PLANTED:
            raise ValueError(f"planted={planted!r} must be one of {sorted(PLANTED)}")
        self.planted = planted

    def elaborate(self, platform):
        m = Module()
        m.d.comb += Assume(~ResetSignal())
        dut = BlockLock(ber_window=BER_WINDOW)
        patch = {"bad-17": ("LOCK_BAD", 17), "good-63": ("LOCK_WINDOW", 63)}.get(self.planted)
        with _constant(*patch) if patch else contextlib.nullcontext():
            dm = dut.elaborate(platform)
        dut._MustUse__used = True
        sig = driven_signals(dm)
        m.submodules.dut = dm

        chunk = Signal(66)
        m.d.comb += [chunk.eq(AnySeq(66)), dut.i_chunk.eq(chunk)]

        # ---- reference: Figure 49-12, one header per cycle ----
        r_lock = Signal()
        r_cnt = Signal(range(GOOD_TO_LOCK + 1))       # sh_cnt
        r_bad = Signal(range(BAD_TO_LOSE + 1))        # sh_invld_cnt
        r_off = Signal(range(66))
        r_prev = Signal(66)
        r_slips = Signal(16)
        window = Signal(132)
        m.d.comb += window.eq(Cat(r_prev, chunk))
        r_block = Signal(66)
        m.d.comb += r_block.eq(window.bit_select(r_off, 66))
        sh_valid = r_block[0] != r_block[1]
        m.d.sync += r_prev.eq(chunk)
        cnt_next = r_cnt + 1
        bad_next = r_bad + 1
        with m.If(sh_valid):                                  # VALID_SH
            with m.If(cnt_next == GOOD_TO_LOCK):
                m.d.sync += [r_cnt.eq(0), r_bad.eq(0)]        # -> RESET_CNT
                with m.If(r_bad == 0):
                    m.d.sync += r_lock.eq(1)                  # 64_GOOD
            with m.Else():
                m.d.sync += r_cnt.eq(cnt_next)                # -> TEST_SH
        with m.Else():                                        # INVALID_SH
            with m.If((bad_next == BAD_TO_LOSE) | ~r_lock):   # -> SLIP
                m.d.sync += [r_lock.eq(0), r_cnt.eq(0), r_bad.eq(0),
                             r_off.eq(Mux(r_off == 65, 0, r_off + 1)),
                             r_slips.eq(Mux(r_slips == 0xFFFF, r_slips, r_slips + 1))]
            with m.Elif(cnt_next == GOOD_TO_LOCK):            # -> RESET_CNT
                m.d.sync += [r_cnt.eq(0), r_bad.eq(0)]
            with m.Else():
                m.d.sync += [r_cnt.eq(cnt_next), r_bad.eq(bad_next)]

        past_block = Signal(66)
        past_lock = Signal()
        m.d.sync += [past_block.eq(r_block), past_lock.eq(r_lock)]

        m.d.comb += [
            Assert(dut.o_lock == r_lock, "lock_matches_reference"),
            Assert(dut.o_offset == r_off, "offset_matches_reference"),
            Assert(dut.o_slips == r_slips, "slips_match_reference"),
            Assert(dut.o_block == past_block, "block_matches_reference"),
            Assert(dut.o_ok == past_lock, "ok_matches_reference"),
            Assert(sig["sh_cnt"] == r_cnt, "sh_cnt_refines"),
            Assert(sig["sh_bad"] == r_bad, "sh_invld_cnt_refines"),
            # invariants of the reference itself (they strengthen the induction)
            Assert(r_off < 66, "reference_offset_in_range"),
            Assert(r_lock | (r_bad == 0), "reference_unlocked_has_no_bad_count"),
        ]
        was_locked = Signal()
        with m.If(r_lock):
            m.d.sync += was_locked.eq(1)
        m.d.comb += [Cover(r_lock, "lock_gained"),
                     Cover(was_locked & ~r_lock, "lock_lost")]
        return m


register(Harness(
    name="pcs-lock",
    doc="PCS block lock vs a reference of Figure 49-12 (64 good to lock, 16 bad in 64 to "
        "lose, slip)",
    build=lambda planted: LockHarness(planted),
    planted=PLANTED,
    mode="prove", depth=2, cover_depth=82, bug_depth=82, fast=False,
))
