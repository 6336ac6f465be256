"""The flow's own check: a proof that passes, one that must fail, and a stuck input caught.

Free inputs: ``b`` (1 bit, ``AnySeq``: a new value every step) and ``k`` (8 bits,
``AnyConst``: one value for the whole trace). Registers count the steps with ``b`` high,
with ``b`` low, and all steps (mod 16), and accumulate ``k`` once per step in two ways.

* Proof (unplanted): ``ones + zeros == steps`` and ``acc_a == acc_b`` (mod 256), by
  induction of depth 1. Covers: ``b`` seen both 0 and 1, ``k`` both 0 and 255; so no free
  input was lowered to a constant (a constant input makes some cover unreachable).
* ``planted="false"``: also asserts ``ones == 0``, false as soon as ``b`` is 1 once: the
  proof must FAIL with a counterexample (the flow can fail).
* ``planted="stuck"``: ``b`` is replaced by the constant 0, the known trap in which a
  false assertion passes: the proof passes (``ones`` stays 0), but the cover of ``b == 1``
  is unreachable, so the run reports ``VACUOUS``, not ``PASS``.
"""

from __future__ import annotations

from amaranth.hdl import Assert, Assume, Const, Cover, Elaboratable, Module, ResetSignal, Signal
from amaranth.asserts import AnyConst, AnySeq

from .flow import Harness, register

PLANTED = {
    "false": "assert that the free bit b was never 1 (false: must FAIL)",
    "stuck": "tie the free bit b to 0 (the proof passes; the b == 1 cover must fail: VACUOUS)",
}


class TrivialHarness(Elaboratable):
    def __init__(self, planted: str | None = None):
        if planted is not None and planted not in PLANTED:
            raise ValueError(f"planted={planted!r} must be one of {sorted(PLANTED)}")
        self.planted = planted

    def elaborate(self, platform):
        m = Module()
        m.d.comb += Assume(~ResetSignal())
        b = Const(0, 1) if self.planted == "stuck" else AnySeq(1)
        k = AnyConst(8)
        ones = Signal(4)
        zeros = Signal(4)
        steps = Signal(4)
        acc_a = Signal(8)
        acc_b = Signal(8)
        n = Signal(8)            # steps mod 256, for acc_b = n * k
        m.d.sync += [steps.eq(steps + 1), n.eq(n + 1), acc_a.eq(acc_a + k)]
        with m.If(b):
            m.d.sync += ones.eq(ones + 1)
        with m.Else():
            m.d.sync += zeros.eq(zeros + 1)
        m.d.comb += acc_b.eq((n * k)[:8])
        m.d.comb += [Assert((ones + zeros)[:4] == steps, "ones_plus_zeros_is_steps"), Assert(acc_a == acc_b, "sum_is_product")]
        if self.planted == "false":
            m.d.comb += Assert(ones == 0, "b_never_high")
        m.d.comb += [Cover(b == 0, "b_low"), Cover(b == 1, "b_high"),
                     Cover(k == 0, "k_zero"), Cover(k == 255, "k_all_ones")]
        return m


register(Harness(
    name="trivial",
    doc="flow self-check: true invariant over free inputs; planted false assertion; "
        "free input stuck at 0",
    build=lambda planted: TrivialHarness(planted),
    planted=PLANTED,
    mode="prove", depth=3, cover_depth=4, fast=True, cover_planted=("stuck",),
))
