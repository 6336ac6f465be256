"""Physical mapping: flits per cycle per port to bytes per second, NVLink 6 figures.

One model cycle is one flit time on a port (each port moves at most one flit per cycle
per direction). The port's line rate per direction is ``lanes x lane_gbps``; the line code
(64b/66b: x 64/66, 256b/257b: x 256/257) and IEEE 802.3 cl. 82 alignment markers (one
block in 16,384 per lane) take their share; what is left carries flits of ``flit_bytes``
on the wire, of which ``payload_bytes`` are payload (a packet's header flits, if any, are
counted by the traffic's packet size, see :func:`packet_efficiency`).

With the FEC profile (``encoding="256b257b"``, ``fec="rs544"``, docs/fec.md) a lane
carries 256/257 x 514/544 = 16/17 (514 = 2 x 257) of its signalling rate as payload bits:
at 400 Gb/s, 376.47 Gb/s, so 36 lanes x 2 directions move 3.388 TB/s per accelerator and
72 accelerators 243.95 TB/s. Carrying the full 3.6 TB/s (400 Gb/s of data per lane) takes
:func:`lane_rate_for` = 400 x 17/16 = 425 Gb/s of signalling per lane, twice the 212.5
Gb/s of IEEE 802.3's 200G lanes, which use the same code.

Defaults (public NVLink 6 figures of the AWS and NVIDIA announcement, re:Invent 2025:
3.6 TB/s per ASIC, 72 ASICs, 400G SerDes): 36 lanes x 400 Gb/s per direction = 1.8 TB/s
per direction = **3.6 TB/s per accelerator**, and 72 accelerators = **259.2 TB/s per
rack** (the announcement's "260 TB/s"). The announced figures are signalling rates; with
``encoding="none"`` the model reports against them directly.

**Physical time.** A model cycle is one flit time (8.9 ps at 1.8 TB/s and 16 B flits); the
cycle model counts a switch traversal as the RTL's 2 cycles *of that flit time*, and knows
no SerDes, PCS, FEC or cable. :func:`hop_latency` adds them in ns: per link, the SerDes
(TX + RX), the PCS (TX + RX, RTL cycles), the RS(544,514) encoder (1 cycle) and decoder
(544/P + 33 cycles, docs/fec.md) and the cable; per switch traversal, the switch pipeline
(RTL cycles). RTL cycles become ns at ``clock_ghz``. One accelerator-to-accelerator path is
two links and one switch traversal (:attr:`HopLatency.path_ns`); the switch's port-to-port
latency, comparable with UALink's target of 150 ns at 25.6 Tb/s, is one link's receive
and transmit halves and the switch (:attr:`HopLatency.port_to_port_ns`). The defaults and
their sources are listed in docs/model.md, "Physical time".
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import PhysParams

__all__ = ["PortRate", "port_rate", "rack_report", "kind_report", "packet_efficiency", "lane_rate_for",
           "ENCODING", "FEC", "HopLatency", "hop_latency", "fec_latency_cycles"]

ENCODING = {"none": 1.0, "64b66b": 64 / 66, "256b257b": 256 / 257}
AM_FACTOR = 16383 / 16384
#: message share of the FEC code: RS(544,514) carries 514 message symbols in 544
FEC = {"none": 1.0, "rs544": 514 / 544}


@dataclass
class PortRate:
    signalling_Bps: float      # per direction, bytes/s on the lanes
    line_Bps: float            # per direction, after line code and markers
    flits_per_s: float         # = model cycles per second
    payload_Bps: float         # per direction, payload of a fully used port
    cycle_s: float             # one model cycle in seconds

    @property
    def accelerator_Bps(self) -> float:
        """Both directions, signalling: the announced per-accelerator figure."""
        return 2 * self.signalling_Bps

    @property
    def efficiency(self) -> float:
        """Payload bytes per signalling byte."""
        return self.payload_Bps / self.signalling_Bps


def port_rate(phys: PhysParams) -> PortRate:
    if phys.payload_bytes > phys.flit_bytes:
        raise ValueError(f"payload_bytes={phys.payload_bytes} exceeds "
                         f"flit_bytes={phys.flit_bytes}")
    sig = phys.lanes * phys.lane_gbps * 1e9 / 8
    line = (sig * ENCODING[phys.encoding] * FEC[phys.fec]
            * (AM_FACTOR if phys.align_markers else 1.0))
    fps = line / phys.flit_bytes
    return PortRate(sig, line, fps, fps * phys.payload_bytes, 1.0 / fps)


def lane_rate_for(data_gbps: float, phys: PhysParams) -> float:
    """Signalling rate per lane, Gb/s, that carries ``data_gbps`` after the line code, the
    FEC and the markers of ``phys`` (the inverse of :func:`port_rate`'s overheads)."""
    share = (ENCODING[phys.encoding] * FEC[phys.fec]
             * (AM_FACTOR if phys.align_markers else 1.0))
    return data_gbps / share


def packet_efficiency(packet_size: int, header_flits: int) -> float:
    """Payload share of a packet with ``header_flits`` header flits (NVLink 1: a 256 B
    payload = 16 data flits + 1 header flit of 16 B gives 16/17 = 94.12 %)."""
    if not 0 <= header_flits < packet_size:
        raise ValueError(f"header_flits={header_flits} must be in 0..packet_size-1 "
                         f"({packet_size})")
    return (packet_size - header_flits) / packet_size


def rack_report(phys: PhysParams, n_ports: int, accepted: float,
                header_flits: int = 0, packet_size: int = 1,
                port_lanes: list[int] | None = None) -> dict:
    """The rack aggregate and the share of it a pattern achieves.

    ``accepted`` is the measured throughput in flits per cycle per port (delivered); in
    steady state every port also injects that much, so the bytes moved per second, both
    directions, are ``2 x accepted x n_ports x payload rate`` (one flit per cycle is a
    full-rate port's payload rate). ``port_lanes``: ports of different lanes
    (``link.ports``); the aggregate is then their lanes' signalling rate, a port of ``l``
    lanes counting ``l / phys.lanes`` of an accelerator's.
    """
    r = port_rate(phys)
    eff = packet_efficiency(packet_size, header_flits)
    aggregate = (n_ports * r.accelerator_Bps if port_lanes is None else
                 sum(port_lanes) / phys.lanes * r.accelerator_Bps)
    achieved = 2 * accepted * n_ports * r.payload_Bps * eff
    return {
        "per_accelerator_TBps": r.accelerator_Bps / 1e12,
        "rack_aggregate_TBps": aggregate / 1e12,
        "line_efficiency": r.efficiency,
        "packet_efficiency": eff,
        "accepted_flits_per_cycle": accepted,
        "achieved_TBps": achieved / 1e12,
        "fraction_of_aggregate": achieved / aggregate,
        "cycle_ps": r.cycle_s * 1e12,
    }


def kind_report(phys: PhysParams, per_kind: dict) -> dict:
    """Each port kind's share of the rack's bandwidth (a sweep point's ``per_kind``,
    :func:`~fusionfabric.sim.fabric.stats.kind_stats`): its line rate both directions in
    TB/s (signalling, the announced kind of figure), its share of the rack's, and the
    payload it moved both directions (TB/s) at the measured flits per cycle."""
    r = port_rate(phys)
    out = {}
    for kind, k in per_kind.items():
        line = k["lanes"] / phys.lanes * r.accelerator_Bps
        out[kind] = {"ports": k["ports"], "lanes": k["lanes"],
                     "line_TBps": line / 1e12, "share_of_rack": k["lane_share"],
                     "moved_TBps": (k["sent"] + k["received"]) * r.payload_Bps / 1e12}
    return out


def fec_latency_cycles(symbols: int) -> int:
    """RTL cycles the RS(544,514) code adds to one link with P = ``symbols`` symbols per
    cycle: the encoder's 1 cycle and the decoder's 544/P + 33 (first input beat to first
    output beat, docs/fec.md); 0 without FEC (``symbols == 0``)."""
    if symbols == 0:
        return 0
    if symbols < 0 or 544 % symbols:
        raise ValueError(f"fec_symbols={symbols} does not divide 544")
    return 1 + 544 // symbols + 33


@dataclass
class HopLatency:
    """Fixed latencies of the physical path, ns (see the module docstring)."""
    serdes_ns: float           # one link, TX + RX
    pcs_ns: float              # one link, TX + RX
    fec_ns: float              # one link, encoder + decoder
    cable_ns: float            # one link
    switch_ns: float           # one switch traversal
    clock_ghz: float

    @property
    def link_ns(self) -> float:
        return self.serdes_ns + self.pcs_ns + self.fec_ns + self.cable_ns

    @property
    def path_ns(self) -> float:
        """Accelerator to accelerator: two links and one switch traversal."""
        return 2 * self.link_ns + self.switch_ns

    @property
    def port_to_port_ns(self) -> float:
        """Switch input pins to output pins: a link's receive and transmit halves (one
        SerDes, PCS and FEC latency in total) and the switch pipeline; no cable."""
        return self.serdes_ns + self.pcs_ns + self.fec_ns + self.switch_ns

    def cycles_ns(self, cycles: float) -> float:
        """RTL cycles at ``clock_ghz`` in ns."""
        return cycles / self.clock_ghz

    def as_dict(self) -> dict:
        return {"serdes_ns": self.serdes_ns, "pcs_ns": self.pcs_ns, "fec_ns": self.fec_ns,
                "cable_ns": self.cable_ns, "switch_ns": self.switch_ns,
                "clock_ghz": self.clock_ghz, "link_ns": self.link_ns,
                "path_ns": self.path_ns, "port_to_port_ns": self.port_to_port_ns}


def hop_latency(phys: PhysParams) -> HopLatency:
    """The per-hop latencies of ``phys`` in ns."""
    if phys.clock_ghz <= 0:
        raise ValueError(f"clock_ghz={phys.clock_ghz} must be positive")
    ns = 1.0 / phys.clock_ghz
    return HopLatency(serdes_ns=float(phys.serdes_ns), pcs_ns=phys.pcs_cycles * ns,
                      fec_ns=fec_latency_cycles(phys.fec_symbols) * ns,
                      cable_ns=phys.cable_m * phys.cable_ns_per_m,
                      switch_ns=phys.switch_cycles * ns, clock_ghz=float(phys.clock_ghz))
