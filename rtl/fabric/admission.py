"""Per-destination admission at an accelerator port: end-to-end credits in switch flits
for each destination, returned by the request's completion (docs/fabric.md, "Admission
per destination")."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from fusionfabric.formats.chiplet import TAG_BITS
from fusionfabric.rtl.chiplet.common import data_slots, nonposted, port_layout

__all__ = ["DestAdmission", "MAX_MSG_FLITS"]

#: Switch flits of the largest message: a header flit and 16 data flits (256 bytes).
MAX_MSG_FLITS = 17


def _first_beat(m, take, slots, name):
    """Whether the beat offered is the first of its message, tracked over the beats
    ``take`` accepts; ``slots`` is the data slots from the beat's header fields (a message
    is ``max(slots, 1)`` beats)."""
    left = Signal(5, name=f"{name}_left")      # beats of the message after this one
    first = left == 0
    with m.If(take):
        m.d.sync += left.eq(Mux(first, Mux(slots > 1, slots - 1, 0), left - 1))
    return first


class DestAdmission(wiring.Component):
    """Admits a request to destination ``d`` only while the switch flits of this port's
    requests to ``d`` that have no completion yet, with the new one, stay within
    ``credits``.

    A non-posted request (READ, WRITE, ATOMIC_ADD) of ``n`` data slots is ``1 + n`` switch
    flits (the ingress bridge's header flit and data flits). Its first beat passes from
    ``i_req`` to ``o_req`` only if ``count[dest] + 1 + n <= credits``; then ``count[dest]``
    grows by ``1 + n`` and the tag's destination and flits are written to a table. When the
    first beat of a completion is taken on ``o_rsp`` (every non-posted request gets exactly
    one there: from its completer, or TIMEOUT/ERROR from the chiplet's completion tracker),
    its tag's entry is read and ``count[dest]`` shrinks by its flits. Other requests
    (MULTICAST, REDUCE, RESULT) and the later beats of a message pass without a check.

    With ``credits`` no larger than the switch's flits per VOQ, the VOQ of this port's
    input towards ``d`` never fills: a request waits here, where the accelerator can send
    to another destination, instead of at the head of the link, where it would hold up
    every flow of this port (docs/fabric.md).

    Parameters
    ----------
    n_dests : int
        Destinations (the switch's ports), 1..256; a request to ``dest >= n_dests`` is
        counted in ``o_bad_dest`` and passes without a check.
    credits : int
        Switch flits per destination, ``MAX_MSG_FLITS`` (17) .. 4095.

    Members
    -------
    i_req : In(stream.Signature(PORT_BEAT))
        Requests from the accelerator.
    o_req : Out(stream.Signature(PORT_BEAT))
        To the chiplet's ``i_req``: ``i_req`` with ``ready`` low on a first beat that does
        not fit.
    i_rsp : In(stream.Signature(PORT_BEAT))
        The chiplet's ``o_rsp`` (completions).
    o_rsp : Out(stream.Signature(PORT_BEAT))
        To the accelerator: ``i_rsp`` unchanged.
    o_dest_ready : Out(n_dests)
        Bit ``d``: a message of any size to ``d`` would pass now
        (``count[d] + MAX_MSG_FLITS <= credits``).
    o_bad_dest : Out(16)
        Requests to a destination past ``n_dests`` (saturating).

    Timing
    ------
    Combinational pass-through (``o_req`` and ``o_rsp`` are the inputs' wires, only
    ``i_req.ready`` is gated). A request taken in cycle t counts from t+1; a completion's
    first beat taken in t frees its flits from t+2 (the table is a block RAM, read in t).
    Reset: every count 0.
    """

    def __init__(self, n_dests: int, credits: int):
        if not isinstance(n_dests, int) or not 1 <= n_dests <= 256:
            raise ValueError(f"n_dests={n_dests!r} must be an integer in 1..256")
        if not isinstance(credits, int) or not MAX_MSG_FLITS <= credits <= 4095:
            raise ValueError(f"credits={credits!r} must be an integer in "
                             f"{MAX_MSG_FLITS}..4095 (switch flits; one 256-byte message "
                             f"is {MAX_MSG_FLITS})")
        self.n_dests, self.credits = n_dests, credits
        beat = stream.Signature(port_layout())
        super().__init__({
            "i_req": In(beat), "o_req": Out(beat),
            "i_rsp": In(beat), "o_rsp": Out(beat),
            "o_dest_ready": Out(n_dests),
            "o_bad_dest": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        n, cap = self.n_dests, self.credits
        dbits = max(1, (n - 1).bit_length())
        entry = data.StructLayout({"dest": dbits, "flits": 5})
        m.submodules.table = table = Memory(shape=entry, depth=1 << TAG_BITS, init=[])
        wp = table.write_port()
        rp = table.read_port(transparent_for=())
        counts = [Signal(range(cap + 1), name=f"count{d}") for d in range(n)]

        # ---- requests: gate the first beat of a non-posted request
        req, out = self.i_req, self.o_req
        hdr = req.payload
        slots = Signal(5)
        m.d.comb += slots.eq(data_slots(hdr.opcode, hdr.length))
        flits = Signal(5)
        m.d.comb += flits.eq(slots + 1)
        np_ = Signal()
        in_range = Signal()
        m.d.comb += [np_.eq(nonposted(hdr.opcode)), in_range.eq(hdr.dest < n)]
        cur = Signal(range(cap + 1))
        sel = counts[0]
        for d in range(1, n):
            sel = Mux(hdr.dest == d, counts[d], sel)
        m.d.comb += cur.eq(sel)
        fits = Signal()
        m.d.comb += fits.eq(cur + flits <= cap)
        first = _first_beat(m, req.valid & req.ready, slots, "req")
        gate = first & np_ & in_range
        m.d.comb += [out.valid.eq(req.valid), out.payload.eq(req.payload),
                     req.ready.eq(out.ready & (~gate | fits))]
        take = req.valid & req.ready
        issue = take & gate
        # every non-posted request gets an entry: one to a destination past n_dests with
        # 0 flits, so that its completion frees nothing
        m.d.comb += [wp.addr.eq(hdr.tag), wp.en.eq(take & first & np_),
                     wp.data.dest.eq(hdr.dest), wp.data.flits.eq(Mux(in_range, flits, 0))]
        bad = take & first & np_ & ~in_range
        with m.If(bad & (self.o_bad_dest != 0xFFFF)):
            m.d.sync += self.o_bad_dest.eq(self.o_bad_dest + 1)

        # ---- completions: pass through, free the tag's flits
        rsp = self.i_rsp
        m.d.comb += [self.o_rsp.valid.eq(rsp.valid), self.o_rsp.payload.eq(rsp.payload),
                     rsp.ready.eq(self.o_rsp.ready)]
        cslots = Signal(5)
        m.d.comb += cslots.eq(data_slots(rsp.payload.opcode, rsp.payload.length))
        ctake = rsp.valid & rsp.ready
        cfirst = ctake & _first_beat(m, ctake, cslots, "cpl")
        m.d.comb += [rp.addr.eq(rsp.payload.tag), rp.en.eq(1)]
        freeing = Signal()
        m.d.sync += freeing.eq(cfirst)
        fe = rp.data

        # ---- counts: + flits of an admitted request, - flits of a completed one
        for d in range(n):
            inc = Mux(issue & (hdr.dest == d), flits, 0)
            dec = Mux(freeing & (fe.dest == d), fe.flits, 0)
            m.d.sync += counts[d].eq(counts[d] + inc - dec)
            m.d.comb += self.o_dest_ready[d].eq(counts[d] <= cap - MAX_MSG_FLITS)
        return m
