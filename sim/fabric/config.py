"""Run configuration of the fabric model: typed sections, TOML files and ``--set`` overrides.

A run is described by five sections, each a dataclass whose fields carry a type, a default,
a one-line doc and (where it applies) the valid choices or a range:

``switch``
    The switch microarchitecture, with the RTL's parameter names (``n_ports``, ``depth``,
    ``iterations``, ``mode``, ...).
``link``
    The links between accelerators and switch ports (latency, credits, framing slots).
``traffic``
    The traffic pattern and its parameters.
``run``
    Cycles, warm-up, seed, batch, offered loads.
``phys``
    The physical mapping from flits per cycle to bytes per second, and the per-hop
    latencies (SerDes, PCS, FEC, cable, switch pipeline) in ns.
``topology``
    One switch (``crossbar``, the default) or a two-tier Clos of such switches (``clos``:
    leaves, spines, routing, the leaf-spine links); sim/fabric/clos.py.

A TOML file holds any of the sections as tables (``[switch]``, ``[traffic]``...); a
``--set section.key=value`` (or ``--set key=value`` when the key is unique) overrides one
field. Every unknown section or key and every bad value raises :class:`ConfigError` with
the valid names, choices or range, so the CLI can print it as one line.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ConfigError", "SwitchParams", "LinkParams", "TrafficParams", "RunParams", "PhysParams",
    "TopologyParams", "Config", "PATTERNS", "ROUTINGS", "load_config", "parse_loads",
    "OVERSUBSCRIPTION_RANGE", "MAX_CLOS_ENDPOINTS",
]


class ConfigError(ValueError):
    """A bad configuration key or value; the message names it and the valid choices."""


PATTERNS = ("uniform", "permutation", "transpose", "hotspot", "bursty", "alltoall",
            "moe_dispatch", "moe_combine", "ring", "trace", "cpu_memory")


def _f(default, doc, *, choices=None, lo=None, hi=None):
    return field(default=default, metadata={"doc": doc, "choices": choices, "lo": lo, "hi": hi})


@dataclass
class SwitchParams:
    """The switch, with the RTL's parameter names and defaults (docs/switch.md)."""
    n_ports: int = _f(4, "number of switch ports", lo=2, hi=256)
    data_width: int = _f(64, "flit data bits (the RTL's data_width)", lo=1)
    depth: int = _f(16, "flits per VOQ (fifo mode: the input FIFO holds n_ports*depth)",
                    lo=1)
    iterations: int = _f(0, "iSLIP rounds per cycle, 1..ceil(log2 n_ports); 0: min(3, max)",
                         lo=0, hi=8)
    mode: str = _f("voq", "input queueing: voq (VOQs + iSLIP), fifo (one FIFO, HOL) or "
                          "crosspoint (a buffer of depth flits per input-output pair, a "
                          "round-robin arbiter per output, no iSLIP: the RTL's "
                          "mode=\"crosspoint\")", choices=("voq", "fifo", "crosspoint"))
    pipeline: bool = _f(False, "the pipelined VOQ switch (the RTL's pipeline=True: "
                               "registered stages, one iSLIP round split over two cycles, "
                               "12-cycle latency; needs mode=voq, iterations 0 or 1; line "
                               "rate needs out_depth >= 10)")
    out_depth: int = _f(4, "output buffer slots = credits per output (>= 2 for line rate)",
                        lo=1)
    n_groups: int = _f(16, "group-table entries (multicast groups)", lo=1, hi=256)
    reduce: bool = _f(False, "per-port reduction units (the RTL's reduce=True): a 2n x 2n "
                             "crossbar, REDUCE flits to unit chunk mod n, results "
                             "multicast from the unit's row; needs mode=voq, "
                             "pipeline=false, one switch, admission fifo")
    n_chunks: int = _f(16, "open-chunk slots per reduction unit (the RTL's n_chunks)",
                       lo=1, hi=64)


@dataclass
class LinkParams:
    """The link from each accelerator to its switch port, and from the port back."""
    latency: int = _f(0, "one-way link latency in cycles (flit and credit each)", lo=0)
    credits: int = _f(0, "credits per link direction = receive buffer slots "
                         "(0: 2*latency+1, enough for line rate)", lo=0)
    frame_period: int = _f(0, "one framing (idle) slot every N cycles on each link; 0: none",
                           lo=0)
    ports: str = _f("", "the switch's ports by kind and lanes, KIND:LANESxCOUNT,... "
                        "(fusionfabric/endpoints.py; e.g. accelerator:36x64,cpu:9x8): a "
                        "port of l lanes moves l/phys.lanes flits per cycle each way; "
                        "empty: every port accelerator at phys.lanes")
    admission: str = _f("fifo", "source admission to the link: fifo (one source queue, "
                                "link credits only: the RTL's endpoint) or voq (one source "
                                "queue per destination and per-VOQ credits from the switch, "
                                "no head-of-line blocking at the link; model only, one "
                                "switch, switch.mode=voq, unicast)", choices=("fifo", "voq"))
    src_voq_depth: int = _f(64, "admission=voq: packets per source queue per destination "
                                "(overflow counted as source drops; run.src_queue is not "
                                "used)", lo=1)


@dataclass
class TrafficParams:
    """The traffic pattern (see sim/fabric/traffic.py)."""
    pattern: str = _f("uniform", "traffic pattern", choices=PATTERNS)
    packet_size: int = _f(1, "flits per packet", lo=1, hi=4096)
    include_self: bool = _f(True, "uniform/hotspot may pick the source's own port "
                                   "(the textbook uniform of Karol et al.)")
    hotspot_ports: int = _f(1, "number of hot ports (ports 0..k-1)", lo=1)
    hotspot_fraction: float = _f(0.2, "fraction of traffic sent to the hot ports", lo=0.0,
                                 hi=1.0)
    burst_length: float = _f(8.0, "bursty: mean on-period in packets", lo=1.0)
    experts: int = _f(0, "MoE: number of experts (0: one per port)", lo=0)
    topk: int = _f(2, "MoE: experts per token", lo=1)
    zipf: float = _f(1.0, "MoE: Zipf exponent of expert popularity (0: uniform)", lo=0.0)
    placement_seed: int = _f(-1, "MoE: seed of the expert placement on ports, the same for "
                                 "every load point (-1: the run seed)", lo=-1)
    trace_file: str = _f("", "trace replay: CSV or JSONL with cycle,source,destination,size")
    own_rate: bool = _f(True, "with link.ports: the load is a fraction of each source's own "
                              "line rate (false: of the full rate, so a slower source "
                              "offered more than it can send backs up)")
    mem_fraction: float = _f(0.02, "cpu_memory: fraction of an accelerator's offered flits "
                                  "that are memory requests to the cpu ports", lo=0.0, hi=1.0)
    read_fraction: float = _f(0.8, "cpu_memory: fraction of memory requests that are READs "
                                   "(the rest WRITEs)", lo=0.0, hi=1.0)
    read_request_flits: int = _f(1, "cpu_memory: flits of a READ request", lo=1, hi=4096)
    read_response_flits: int = _f(4, "cpu_memory: flits of a READ response (the data)",
                                  lo=1, hi=4096)
    write_flits: int = _f(4, "cpu_memory: flits of a WRITE request (header and data)", lo=1,
                          hi=4096)
    write_response_flits: int = _f(1, "cpu_memory: flits of a WRITE completion", lo=1,
                                   hi=4096)


@dataclass
class RunParams:
    """Run length, statistics windows, seeds and batch."""
    cycles: int = _f(10_000, "sample-period cycles", lo=1)
    warmup: int = _f(-1, "warm-up cycles before sampling (-1: cycles/4)", lo=-1)
    drain: int = _f(-1, "max cycles after sampling to deliver sampled packets (-1: cycles)",
                    lo=-1)
    seed: int = _f(1, "random seed (every run prints it)", lo=0)
    loads: str = _f("0.1:1.0:0.1", "offered loads START:STOP:STEP (inclusive) or a,b,c")
    seeds: int = _f(1, "independent seeds per load (batch points = loads x seeds)", lo=1)
    src_queue: int = _f(4096, "source queue per port in packets (overflow counted as "
                              "source drops)", lo=1)


@dataclass
class PhysParams:
    """Physical mapping: signalling, encoding and flits to bytes per second.

    Defaults are the public NVLink 6 figures: 3.6 TB/s per accelerator (both directions),
    i.e. 36 lanes x 400 Gb/s per direction.
    """
    lane_gbps: float = _f(400.0, "signalling rate per lane per direction, Gb/s", lo=0.0)
    lanes: int = _f(36, "lanes per port per direction", lo=1)
    encoding: str = _f("none", "line code overhead applied to the lane rate",
                       choices=("none", "64b66b", "256b257b"))
    align_markers: bool = _f(False, "IEEE 802.3 cl. 82 markers: 1 block in 16,384 per lane")
    fec: str = _f("none", "forward error correction overhead (rs544: RS(544,514), "
                          "514 message symbols per 544)", choices=("none", "rs544"))
    flit_bytes: int = _f(16, "bytes on the wire per flit (header included)", lo=1)
    payload_bytes: int = _f(16, "payload bytes per flit (<= flit_bytes)", lo=1)
    header_flits: int = _f(0, "header flits per packet (NVLink 1: 1 per 16 data flits)",
                           lo=0)
    # per-hop latencies (docs/model.md, "Physical time", cites each default)
    clock_ghz: float = _f(1.0, "clock of the RTL pipelines (PCS, FEC, switch, reduction "
                               "unit) that turns their cycle counts into ns (assumed)",
                          lo=1e-3)
    serdes_ns: float = _f(26.3, "SerDes TX + RX latency of one link, ns (AMD PG056: GTY "
                                "transceiver 638 UI at 24.3 Gb/s)", lo=0.0)
    pcs_cycles: int = _f(5, "PCS TX + RX latency of one link in RTL cycles (docs/pcs.md, "
                            "W = 66, lanes straight)", lo=0)
    fec_symbols: int = _f(68, "RS(544,514) decoder width P in symbols per cycle (divides "
                              "544); latency 1 + 544/P + 33 cycles per link; 0: no FEC",
                          lo=0, hi=544)
    cable_m: float = _f(1.0, "cable/trace length of one link, m (assumed)", lo=0.0)
    cable_ns_per_m: float = _f(4.9, "propagation delay, ns/m (velocity factor 0.68 of c, "
                                    "copper)", lo=0.0)
    switch_cycles: int = _f(2, "switch pipeline, input handshake to output valid, RTL "
                               "cycles (docs/switch.md: voq 2, pipelined 12, crosspoint 10)",
                            lo=0)


ROUTINGS = ("deterministic", "ecmp", "adaptive")
#: Accepted leaf oversubscription ``endpoints_per_leaf / spines`` (one uplink per spine):
#: from 1/2 (twice as many uplinks as endpoints, past Clos's 2n - 1 strictly non-blocking
#: middle stage) to 16:1.
OVERSUBSCRIPTION_RANGE = (0.5, 16.0)
#: Endpoints of a Clos: the source endpoint rides in 12 bits of a flit's sequence number.
MAX_CLOS_ENDPOINTS = 4096


@dataclass
class TopologyParams:
    """One switch, or a two-tier Clos (leaf-spine) of identical switches (sim/fabric/clos.py).

    In a Clos every switch is the ``[switch]`` microarchitecture (``switch.n_ports`` is not
    used: a leaf has ``endpoints_per_leaf + spines`` ports, a spine one port per leaf); the
    endpoint links are ``[link]``, the leaf-spine links ``link_latency`` / ``link_credits``.
    """
    kind: str = _f("crossbar", "crossbar: one switch of switch.n_ports ports; clos: two-tier "
                               "leaf-spine", choices=("crossbar", "clos"))
    radix: int = _f(64, "clos: ports per switch (a leaf needs endpoints_per_leaf + spines, "
                        "a spine one per leaf)", lo=2, hi=256)
    endpoints: int = _f(1024, "clos: endpoints (a multiple of endpoints_per_leaf)", lo=1,
                        hi=MAX_CLOS_ENDPOINTS)
    endpoints_per_leaf: int = _f(32, "clos: endpoint ports per leaf", lo=1, hi=255)
    spines: int = _f(32, "clos: spine switches = uplinks per leaf (one link to each spine)",
                     lo=1, hi=255)
    routing: str = _f("adaptive", "clos uplink choice: deterministic (dest mod spines), ecmp "
                                  "(hash of source, destination), adaptive (least-occupied "
                                  "uplink)", choices=ROUTINGS)
    link_latency: int = _f(1, "clos: one-way leaf-spine link latency in cycles (flit and "
                              "credit each)", lo=1)
    link_credits: int = _f(0, "clos: credits per leaf-spine link direction (0: "
                              "2*link_latency+1)", lo=0)

    @property
    def leaves(self) -> int:
        return self.endpoints // self.endpoints_per_leaf

    @property
    def oversubscription(self) -> float:
        return self.endpoints_per_leaf / self.spines


SECTIONS = {"switch": SwitchParams, "link": LinkParams, "traffic": TrafficParams,
            "run": RunParams, "phys": PhysParams, "topology": TopologyParams}


@dataclass
class Config:
    switch: SwitchParams = field(default_factory=SwitchParams)
    link: LinkParams = field(default_factory=LinkParams)
    traffic: TrafficParams = field(default_factory=TrafficParams)
    run: RunParams = field(default_factory=RunParams)
    phys: PhysParams = field(default_factory=PhysParams)
    topology: TopologyParams = field(default_factory=TopologyParams)

    @property
    def endpoints(self) -> int:
        """Endpoints of the run: switch.n_ports, or topology.endpoints for a Clos."""
        return self.topology.endpoints if self.topology.kind == "clos" else self.switch.n_ports

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def port_groups(self):
        """The parsed ``link.ports`` (:func:`fusionfabric.endpoints.parse_endpoints`; lanes
        1..``phys.lanes``, exactly ``switch.n_ports`` ports), or ``None`` when empty."""
        from fusionfabric.endpoints import parse_endpoints
        text = self.link.ports
        if not text:
            return None
        if self.topology.kind == "clos":
            raise ConfigError(f"link.ports={text!r}: ports of different kinds and rates are "
                              "modelled on one switch (topology.kind=crossbar) only")
        try:
            groups = parse_endpoints(text, switch_ports=self.switch.n_ports,
                                     lane_limit=(self.phys.lanes, "phys.lanes"))
        except ValueError as exc:
            raise ConfigError(f"link.ports: {exc}") from None
        total = sum(g.count for g in groups)
        if total != self.switch.n_ports:
            raise ConfigError(f"link.ports={text!r} lists {total} ports, the switch has "
                              f"switch.n_ports={self.switch.n_ports}: list every port")
        if self.traffic.pattern in ("bursty",):
            raise ConfigError(f"traffic.pattern={self.traffic.pattern} is not modelled with "
                              "link.ports (its on/off process has no per-port rate)")
        return groups

    def port_table(self) -> list[tuple[str, int]]:
        """``(kind, lanes)`` of every port: from ``link.ports``, or every port an
        accelerator of ``phys.lanes`` lanes."""
        from fusionfabric.endpoints import expand
        groups = self.port_groups()
        if groups is None:
            return [("accelerator", self.phys.lanes)] * self.endpoints
        return [(e.kind, e.lanes) for e in expand(groups)]

    def set(self, key: str, value: Any) -> None:
        """Set ``section.key`` (or a key unique across sections) from a value or string."""
        section, name = _resolve_key(key)
        obj = getattr(self, section)
        setattr(obj, name, _coerce(section, name, value))

    def validate(self) -> "Config":
        for section in SECTIONS:
            obj = getattr(self, section)
            for f in dataclasses.fields(obj):
                setattr(obj, f.name, _coerce(section, f.name, getattr(obj, f.name)))
        if self.phys.payload_bytes > self.phys.flit_bytes:
            raise ConfigError(f"phys.payload_bytes={self.phys.payload_bytes} exceeds "
                              f"phys.flit_bytes={self.phys.flit_bytes}")
        if self.topology.kind == "clos":
            check_clos(self.topology, self.switch)
        if self.link.ports:
            self.port_groups()
        if self.link.admission == "voq":
            if self.topology.kind == "clos":
                raise ConfigError("link.admission='voq': per-destination admission is "
                                  "modelled on one switch (topology.kind=crossbar) only")
            if self.switch.mode != "voq":
                raise ConfigError(f"link.admission='voq' needs switch.mode=voq (switch.mode="
                                  f"{self.switch.mode!r} has no VOQs to hold credits for)")
        if self.switch.mode == "crosspoint" and self.switch.iterations:
            raise ConfigError(f"switch.iterations={self.switch.iterations}: switch.mode="
                              f"crosspoint has no iSLIP (leave it 0)")
        if self.switch.pipeline:
            if self.switch.mode != "voq":
                raise ConfigError(f"switch.pipeline=true needs switch.mode=voq (switch.mode="
                                  f"{self.switch.mode})")
            if self.switch.iterations > 1:
                raise ConfigError(f"switch.iterations={self.switch.iterations}: "
                                  f"switch.pipeline=true runs one iSLIP round (0 or 1)")
            if self.topology.kind == "clos":
                raise ConfigError("switch.pipeline=true is modelled on one switch "
                                  "(topology.kind=crossbar) only")
            if self.link.admission == "voq":
                raise ConfigError("link.admission='voq' is modelled with "
                                  "switch.pipeline=false only")
        if self.switch.reduce:
            if self.switch.mode != "voq" or self.switch.pipeline:
                raise ConfigError(f"switch.reduce=true is modelled with switch.mode=voq and "
                                  f"switch.pipeline=false only (switch.mode="
                                  f"{self.switch.mode}, switch.pipeline="
                                  f"{str(self.switch.pipeline).lower()})")
            if self.topology.kind == "clos":
                raise ConfigError("switch.reduce=true is modelled on one switch "
                                  "(topology.kind=crossbar) only")
            if self.link.admission == "voq":
                raise ConfigError("link.admission='voq' is modelled with "
                                  "switch.reduce=false only")
            if self.switch.n_ports > 128 or self.switch.data_width % 32:
                raise ConfigError(f"switch.reduce=true needs switch.n_ports <= 128 (got "
                                  f"{self.switch.n_ports}) and switch.data_width a multiple "
                                  f"of 32 (got {self.switch.data_width}), as the RTL")
        top = max_iterations(self.switch.n_ports)
        if self.topology.kind == "crossbar" and self.switch.iterations > top:
            raise ConfigError(f"switch.iterations={self.switch.iterations} is above the "
                              f"maximum {top} = ceil(log2 n_ports) for n_ports="
                              f"{self.switch.n_ports}")
        if self.traffic.hotspot_ports > self.endpoints:
            raise ConfigError(f"traffic.hotspot_ports={self.traffic.hotspot_ports} exceeds "
                              f"the {self.endpoints} endpoints")
        if self.traffic.pattern == "cpu_memory":
            kinds = [k for k, _ in self.port_table()]
            if "cpu" not in kinds or sum(k != "cpu" for k in kinds) < 2:
                raise ConfigError("traffic.pattern=cpu_memory needs link.ports with at least "
                                  "one cpu port and two other ports (e.g. link.ports="
                                  "accelerator:36x64,cpu:9x8)")
        if self.traffic.pattern == "trace" and not self.traffic.trace_file:
            raise ConfigError("traffic.pattern=trace needs traffic.trace_file=FILE")
        if self.phys.fec_symbols and 544 % self.phys.fec_symbols:
            raise ConfigError(f"phys.fec_symbols={self.phys.fec_symbols} does not divide 544 "
                              f"(valid: 0, 1, 2, 4, 8, 16, 17, 32, 34, 68, 136, 272, 544)")
        if self.phys.header_flits >= self.traffic.packet_size and self.phys.header_flits:
            raise ConfigError(f"phys.header_flits={self.phys.header_flits} must be below "
                              f"traffic.packet_size={self.traffic.packet_size}")
        parse_loads(self.run.loads)
        return self


def check_clos(topo: TopologyParams, switch: SwitchParams | None = None) -> None:
    """Raise :class:`ConfigError` (one line naming the value) if the Clos cannot be built."""
    epl, sp, r = topo.endpoints_per_leaf, topo.spines, topo.radix
    if epl + sp > r:
        raise ConfigError(f"topology.radix={r} is too small for a leaf of "
                          f"endpoints_per_leaf={epl} + spines={sp} uplinks = {epl + sp} ports")
    if topo.endpoints % epl:
        raise ConfigError(f"topology.endpoints={topo.endpoints} is not a multiple of "
                          f"topology.endpoints_per_leaf={epl}")
    if topo.leaves > r:
        raise ConfigError(f"topology.endpoints={topo.endpoints} is more than radix x "
                          f"endpoints_per_leaf = {r} x {epl} = {r * epl} (a spine has {r} "
                          f"ports, one per leaf)")
    lo, hi = OVERSUBSCRIPTION_RANGE
    if not lo <= topo.oversubscription <= hi:
        raise ConfigError(f"topology oversubscription endpoints_per_leaf/spines = {epl}/{sp} "
                          f"= {topo.oversubscription:g} is outside {lo:g}..{hi:g}")
    if switch is not None and switch.mode != "voq":
        raise ConfigError(f"switch.mode={switch.mode!r}: topology.kind=clos models voq "
                          f"switches only")


def max_iterations(n_ports: int) -> int:
    """The RTL's bound on iSLIP rounds: ``max(1, ceil(log2 n_ports))``."""
    return max(1, math.ceil(math.log2(n_ports)))


def _all_keys() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            out.setdefault(f.name, []).append(section)
    return out


def _resolve_key(key: str) -> tuple[str, str]:
    key = key.strip()
    if "." in key:
        section, name = key.split(".", 1)
        if section not in SECTIONS:
            raise ConfigError(f"unknown section {section!r} in {key!r} "
                              f"(sections: {', '.join(SECTIONS)})")
        names = [f.name for f in dataclasses.fields(SECTIONS[section])]
        if name not in names:
            raise ConfigError(f"unknown key {key!r} (keys of [{section}]: {', '.join(names)})")
        return section, name
    owners = _all_keys().get(key)
    if not owners:
        valid = ", ".join(f"{s}.{f.name}" for s, c in SECTIONS.items()
                          for f in dataclasses.fields(c))
        raise ConfigError(f"unknown key {key!r} (valid keys: {valid})")
    if len(owners) > 1:
        raise ConfigError(f"key {key!r} is ambiguous; write one of "
                          f"{', '.join(f'{s}.{key}' for s in owners)}")
    return owners[0], key


def _coerce(section: str, name: str, value: Any) -> Any:
    f = {f.name: f for f in dataclasses.fields(SECTIONS[section])}[name]
    typ = type(f.default)
    where = f"{section}.{name}"
    try:
        if typ is bool:
            if isinstance(value, str):
                low = value.strip().lower()
                if low not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError
                value = low in ("1", "true", "yes", "on")
            elif not isinstance(value, (bool, int)):
                raise ValueError
            value = bool(value)
        elif typ is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            value = int(str(value).replace("_", "")) if isinstance(value, str) else int(value)
        elif typ is float:
            if isinstance(value, bool):
                raise ValueError
            value = float(value)
        else:
            value = str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}={value!r} is not a valid {typ.__name__} "
                          f"({f.metadata['doc']})") from None
    md = f.metadata
    if md["choices"] and value not in md["choices"]:
        raise ConfigError(f"{where}={value!r} is not one of: {', '.join(md['choices'])}")
    if md["lo"] is not None and value < md["lo"]:
        raise ConfigError(f"{where}={value!r} is below the minimum {md['lo']} ({md['doc']})")
    if md["hi"] is not None and value > md["hi"]:
        raise ConfigError(f"{where}={value!r} is above the maximum {md['hi']} ({md['doc']})")
    return value


def parse_loads(text: str) -> list[float]:
    """``"0.1:1.0:0.1"`` (inclusive) or ``"0.3,0.5"`` into a list of loads in (0, 1]."""
    text = str(text).strip()
    try:
        if ":" in text:
            parts = text.split(":")
            if len(parts) != 3:
                raise ValueError
            start, stop, step = (float(q) for q in parts)
        else:
            loads = [float(q) for q in text.split(",") if q.strip()]
    except ValueError:
        raise ConfigError(f"loads {text!r} is not START:STOP:STEP or a comma list") from None
    if ":" in text:
        if step <= 0:
            raise ConfigError(f"loads {text!r}: STEP must be positive")
        n = int(round((stop - start) / step)) + 1
        if n < 1:
            raise ConfigError(f"loads {text!r}: STOP is below START")
        loads = [round(start + k * step, 10) for k in range(n)]
    if not loads:
        raise ConfigError(f"loads {text!r} is empty")
    for x in loads:
        if not 0.0 < x <= 1.0:
            raise ConfigError(f"load {x} in {text!r} is outside (0, 1]")
    return loads


def load_config(path: str | Path | None = None, sets: list[str] | None = None,
                base: Config | None = None) -> Config:
    """Read a TOML file (optional), apply ``KEY=VALUE`` overrides, validate."""
    cfg = base if base is not None else Config()
    if path:
        p = Path(path)
        try:
            doc = tomllib.loads(p.read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {str(p)!r} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(p)!r} is not valid TOML: {exc}") from None
        for section, table in doc.items():
            if not isinstance(table, dict):
                raise ConfigError(f"{p}: top-level {section} = {table!r} must be a table "
                                  f"(put it under one of [{'], ['.join(SECTIONS)}])")
            if section not in SECTIONS:
                raise ConfigError(f"{p}: unknown section [{section}] "
                                  f"(sections: {', '.join(SECTIONS)})")
            for key, value in table.items():
                cfg.set(f"{section}.{key}", value)
    for item in sets or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r} is not KEY=VALUE")
        cfg.set(key, value.strip())
    return cfg.validate()
