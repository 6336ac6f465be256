"""Synthesizable traffic harness around the switch, for fast throughput/latency runs.

Each input has a 32-bit xorshift generator (Marsaglia 2003) and a source queue of arrival
timestamps. Every cycle, input i gets a new unicast flit with probability
``i_load / 65536`` (Bernoulli arrivals; ``i_load = 65536`` is offered load 1.0), its
destination uniform over the ports, its ``data`` the arrival cycle. The switch takes flits
from the source queues as it can; every output is always ready. Counters (gated by
``i_measure``) give accepted and delivered flits and the sum and maximum of the latency
from arrival to output handshake. The whole experiment runs inside the simulator: the
cocotb side only sets ``i_load``, waits and reads counters.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.rtl.switch.top import Switch
from fusionfabric.formats.switch import Kind

__all__ = ["TrafficHarness"]


class TrafficHarness(wiring.Component):
    """A :class:`~fusionfabric.rtl.switch.top.Switch` fed by per-input Bernoulli uniform traffic.

    Members
    -------
    i_load : In(17)       arrival probability × 65536 per input per cycle
    i_measure : In(1)     count while high
    o_offered, o_accepted, o_delivered : Out(32)
        arrivals, input handshakes, output handshakes (all ports, while measuring)
    o_lat_sum : Out(48), o_lat_max : Out(32)
        sum and maximum of (output cycle − arrival cycle) over delivered flits
    o_overflow : Out(32)  arrivals lost because a source queue was full
    """

    def __init__(self, source_depth: int = 512, seed: int = 1, **switch_params):
        self.switch_params = switch_params
        self.source_depth = source_depth
        self.seed = seed
        super().__init__({
            "i_load": In(17), "i_measure": In(1),
            "o_offered": Out(32), "o_accepted": Out(32), "o_delivered": Out(32),
            "o_lat_sum": Out(48), "o_lat_max": Out(32), "o_overflow": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.switch = sw = Switch(**self.switch_params)
        n = sw.n_ports
        now = Signal(32)
        m.d.sync += now.eq(now + 1)
        dbits = max(1, (n - 1).bit_length())

        arrivals, accepts, delivers, lats = [], [], [], []
        for i in range(n):
            x = Signal(32, init=(0x9E3779B9 * (i + 1) + self.seed * 0x85EBCA6B) & 0xFFFFFFFF
                       or 1, name=f"rng{i}")
            a = x ^ (x << 13)[:32]
            b = a ^ (a >> 17)
            c = b ^ (b << 5)[:32]
            m.d.sync += x.eq(c)
            arrive = Signal(name=f"arrive{i}")
            m.d.comb += arrive.eq(x[:16] < self.i_load)
            dest = Signal(dbits, name=f"dest{i}")
            m.d.comb += dest.eq(((x[16:32] * n) >> 16)[:dbits])
            q = fifo.SyncFIFO(width=32 + dbits, depth=self.source_depth)
            m.submodules[f"src{i}"] = q
            m.d.comb += [q.w_en.eq(arrive), q.w_data.eq(Cat(now, dest))]
            port = sw.i_port[i]
            m.d.comb += [
                port.valid.eq(q.r_rdy),
                port.payload.data.eq(q.r_data[:32]),
                port.payload.dest.eq(q.r_data[32:]),
                port.payload.kind.eq(Kind.UNICAST),
                port.payload.first.eq(1), port.payload.last.eq(1),
                q.r_en.eq(port.ready),
            ]
            arrivals.append(arrive)
            accepts.append(port.valid & port.ready)
            with m.If(self.i_measure & arrive & ~q.w_rdy):
                m.d.sync += self.o_overflow.eq(self.o_overflow + 1)

        for o in range(n):
            port = sw.o_port[o]
            m.d.comb += port.ready.eq(1)
            hs = port.valid & port.ready
            lat = Signal(32, name=f"lat{o}")
            m.d.comb += lat.eq(Mux(hs, now - port.payload.data[:32], 0))
            delivers.append(hs)
            lats.append(lat)

        def total(bits):
            s = Const(0, 8)
            for v in bits:
                s = s + v
            return s

        lat_sum = Const(0, 40)
        lat_max = Const(0, 32)
        for v in lats:
            lat_sum = lat_sum + v
            lat_max = Mux(v > lat_max, v, lat_max)
        with m.If(self.i_measure):
            m.d.sync += [
                self.o_offered.eq(self.o_offered + total(arrivals)),
                self.o_accepted.eq(self.o_accepted + total(accepts)),
                self.o_delivered.eq(self.o_delivered + total(delivers)),
                self.o_lat_sum.eq(self.o_lat_sum + lat_sum),
                self.o_lat_max.eq(Mux(lat_max > self.o_lat_max, lat_max, self.o_lat_max)),
            ]
        return m
