"""Synthesizable all-reduce harness around the switch with reduction units, for
bench/switch_throughput.py: in-network all-reduce against a ring all-reduce on the same
switch build, selected at run time.

Both move a vector of ``flits`` flits per port (``flits`` a multiple of ``n_ports``).

- In-network (``i_algo = 0``): port p sends ``flits`` REDUCE flits (group 0, chunk k,
  every 32-bit element ``p + 1``), in chunk order, as fast as the switch takes them; it is
  done when it has received ``flits`` RESULT flits. Every result element must equal
  ``n(n+1)/2`` (mismatches counted in ``o_bad``). A port keeps at most
  ``n (n_chunks - 1)`` chunks sent ahead of the results it has received, which bounds the
  skew between ports and so the chunks open in any unit (the sender window that
  docs/switch.md asks for).
- Ring (``i_algo = 1``): reduce-scatter then all-gather over the ring p → p+1,
  2(n−1) steps of ``m = flits/n`` flits. Flit s of port p (of 2(n−1)m) may leave once
  p has received flit s − m (the same element of the previous step), s ≥ m; the add of a
  reduce-scatter step is taken as free (zero cycles), which favours the ring.

``o_cycles`` counts from the first cycle after the group-table write to the cycle in
which the last port has everything. Group 0 (all ports, ALLREDUCE, INT32, SUM) is written
through the configuration port by the harness itself after reset.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.switch.top import Switch
from fusionfabric.formats.switch import Dtype, Kind, Mode, Op, group_entry

__all__ = ["AllReduceHarness"]


class AllReduceHarness(wiring.Component):
    def __init__(self, flits: int = 512, **switch_params):
        self.switch_params = {**switch_params, "reduce": True}
        self.flits = flits
        n = switch_params["n_ports"]
        if flits % n:
            raise ValueError(f"flits={flits} must be a multiple of n_ports={n}")
        self.window = n * (switch_params.get("n_chunks", 16) - 1)
        super().__init__({"i_algo": In(1), "o_done": Out(1), "o_cycles": Out(32),
                          "o_bad": Out(32), "o_results": Out(32)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.switch = sw = Switch(**self.switch_params)
        n = sw.n_ports
        S = self.flits
        mseg = S // n
        total_ring = 2 * (n - 1) * mseg
        lanes = sw.data_width // 32

        # configuration: one beat after reset
        cfg_done = Signal()
        entry = group_entry(n)
        word = entry.pack(members=(1 << n) - 1, op=Op.SUM, dtype=Dtype.INT32,
                          mode=Mode.ALLREDUCE, root=0, native=0, valid=1)
        m.d.comb += [sw.i_config.valid.eq(~cfg_done),
                     sw.i_config.payload.group.eq(0),
                     sw.i_config.payload.entry.eq(word)]
        m.d.sync += cfg_done.eq(1)
        running = Signal()
        m.d.sync += running.eq(cfg_done)

        dones = []
        n_res, n_bad = [], []
        expect = n * (n + 1) // 2
        for p in range(n):
            sent = Signal(range(max(S, total_ring) + 1), name=f"sent{p}")
            recv = Signal(range(max(S, total_ring) + 1), name=f"recv{p}")
            port = sw.i_port[p]
            out = sw.o_port[p]
            target = Mux(self.i_algo, total_ring, S)
            ring_ok = (sent < mseg) | (recv > sent - mseg)
            # in-network: at most `window` chunks sent ahead of the results received, so no
            # unit ever has more than n_chunks - 1 chunks open (docs/switch.md caveat)
            window_ok = sent < recv + self.window
            m.d.comb += [
                port.valid.eq(running & (sent < target)
                              & Mux(self.i_algo, ring_ok, window_ok)),
                port.payload.first.eq(1), port.payload.last.eq(1),
                port.payload.kind.eq(Mux(self.i_algo, Kind.UNICAST, Kind.REDUCE)),
                port.payload.dest.eq(Mux(self.i_algo, (p + 1) % n, 0)),
                port.payload.chunk.eq(sent),
                port.payload.data.eq(Cat(Const(p + 1, 32) for _ in range(lanes))),
                out.ready.eq(1),
            ]
            with m.If(port.valid & port.ready):
                m.d.sync += sent.eq(sent + 1)
            want_kind = Mux(self.i_algo, Kind.UNICAST, Kind.RESULT)
            with m.If(out.valid & (out.payload.kind == want_kind)):
                m.d.sync += recv.eq(recv + 1)
            ok = Cat(out.payload.data[32 * k:32 * k + 32] == expect for k in range(lanes)).all()
            is_res = out.valid & (out.payload.kind == Kind.RESULT)
            n_res.append(is_res)
            n_bad.append(is_res & ~ok)
            dones.append(recv == target)
        def total(bits):
            t = Const(0, 8)
            for b in bits:
                t = t + b
            return t

        m.d.sync += [self.o_results.eq(self.o_results + total(n_res)),
                     self.o_bad.eq(self.o_bad + total(n_bad))]
        done = Cat(dones).all()
        m.d.comb += self.o_done.eq(done)
        with m.If(running & ~done):
            m.d.sync += self.o_cycles.eq(self.o_cycles + 1)
        return m
