"""The endpoint list of a heterogeneous rack: ``accelerator:4x4,cpu:1x2,gpu:8x1``.

Comma-separated items ``KIND:LANESxCOUNT``: ``COUNT`` endpoints of kind ``KIND``, each with
``LANES`` lanes per direction. Endpoints are numbered in the order listed (the example:
endpoints 0-3 accelerators of 4 lanes, 4-5 cpus of 1 lane, 6 a gpu of 8 lanes).

Kinds (:data:`KINDS`):

``accelerator``
    An accelerator behind a chiplet: it sends requests and completes the requests it gets.
``gpu``
    An accelerator endpoint under its own label (same port and behaviour; the label lets a
    workload or a report tell the two populations apart). Its lanes are given explicitly,
    like every kind's.
``cpu``
    A memory target behind the chiplet (``fusionfabric.rtl.fabric.memory.MemTarget``,
    docs/fabric.md "Memory target (cpu endpoints)"): it serves WRITE, READ and ATOMIC_ADD.

Lanes per direction are bounded by the lane profile (:func:`max_lanes`): ``64b66b`` takes
1..20 (the PCS's clause-82 marker set, ``fusionfabric.formats.pcs.MAX_LANES``), ``rs544``
one of 1, 2, 4, 8, 16 (``fusionfabric.formats.fec_pcs.LANE_COUNTS``). The total must fit
the switch: at least 2 endpoints and at most ``switch_ports`` (default 128, the fabric
block's ``n_endpoints`` limit).

A bad list raises ``ValueError`` with one line naming the bad value.

:func:`fabric_kwargs` turns a list into the arguments of the RTL fabric
(``fusionfabric.rtl.fabric.Fabric``): ``n_endpoints``, ``cpu_endpoints`` (the fabric puts a
memory target behind each cpu endpoint's chiplet) and ``endpoint_lanes`` (each endpoint's
lanes per direction). The fabric's links take fewer lane counts than the profiles
(:data:`FABRIC_LANES`): 1 or 2 lanes with ``64b66b``, 2 with ``rs544``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fusionfabric.formats.fec_pcs import LANE_COUNTS
from fusionfabric.formats.pcs import MAX_LANES

__all__ = ["KINDS", "PROFILES", "DEFAULT_SWITCH_PORTS", "EndpointGroup", "Endpoint",
           "max_lanes", "parse_endpoints", "expand", "format_endpoints", "fabric_kwargs",
           "FABRIC_LANES", "check_fabric_lanes"]

KINDS = ("accelerator", "cpu", "gpu")
#: Lane counts each lane profile accepts (the fabric block's ``lane_profile``).
PROFILES = {"64b66b": tuple(range(1, MAX_LANES + 1)), "rs544": tuple(LANE_COUNTS)}
#: Switch ports when none are given: the fabric block's ``n_endpoints`` limit.
DEFAULT_SWITCH_PORTS = 128

_ITEM = re.compile(r"(?P<kind>[^:]*):(?P<lanes>[^xX]*)[xX](?P<count>.*)")


@dataclass(frozen=True)
class EndpointGroup:
    """``count`` endpoints of one kind with ``lanes`` lanes per direction."""
    kind: str
    lanes: int
    count: int

    def __str__(self):
        return f"{self.kind}:{self.lanes}x{self.count}"


@dataclass(frozen=True)
class Endpoint:
    """One endpoint of the rack: its index (switch port), kind and lanes."""
    index: int
    kind: str
    lanes: int


def max_lanes(lane_profile: str) -> int:
    """The most lanes per direction of ``lane_profile`` (``64b66b`` or ``rs544``)."""
    if lane_profile not in PROFILES:
        raise ValueError(f"lane_profile={lane_profile!r} is not one of "
                         f"{', '.join(PROFILES)}")
    return max(PROFILES[lane_profile])


def _number(text: str, what: str, item: str) -> int:
    t = text.strip()
    if not t.isdigit() or not t.isascii():
        raise ValueError(f"{what} {text.strip()!r} in endpoint item {item!r} is not a "
                         "whole number")
    return int(t)


def parse_endpoints(text: str, *, lane_profile: str = "64b66b",
                    switch_ports: int = DEFAULT_SWITCH_PORTS,
                    lane_limit: tuple[int, str] | None = None) -> tuple[EndpointGroup, ...]:
    """The groups of an endpoint list, in order; ``ValueError`` (one line naming the bad
    value) on an empty list or item, an unknown kind, a lane or endpoint count of zero or
    not a number, lanes the profile does not take, or more endpoints than
    ``switch_ports`` (or fewer than 2).

    ``lane_limit = (n, name)`` replaces the profile's lane counts by ``1..n``, the bound
    called ``name`` in the message (the fabric model: ``phys.lanes``, a full-rate port)."""
    max_lanes(lane_profile)
    if not isinstance(switch_ports, int) or isinstance(switch_ports, bool) or switch_ports < 2:
        raise ValueError(f"switch_ports={switch_ports!r} must be an integer >= 2")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"endpoints={text!r} is empty: give KIND:LANESxCOUNT items, e.g. "
                         "accelerator:4x4,cpu:1x2")
    groups = []
    for pos, raw in enumerate(text.split(",")):
        item = raw.strip()
        if not item:
            raise ValueError(f"endpoints={text!r}: item {pos + 1} is empty")
        m = _ITEM.fullmatch(item)
        if m is None:
            raise ValueError(f"endpoint item {item!r} is not KIND:LANESxCOUNT "
                             "(e.g. cpu:1x2)")
        kind = m["kind"].strip()
        if kind not in KINDS:
            raise ValueError(f"endpoint kind {kind!r} in {item!r} is not one of "
                             f"{', '.join(KINDS)}")
        lanes = _number(m["lanes"], "lanes", item)
        count = _number(m["count"], "count", item)
        allowed = PROFILES[lane_profile]
        if lane_limit is not None:
            allowed = tuple(range(1, int(lane_limit[0]) + 1))
        if lanes == 0:
            raise ValueError(f"lanes=0 in endpoint item {item!r}: an endpoint needs at "
                             "least 1 lane")
        if lanes > max(allowed):
            bound = (f"{lane_limit[1]}={lane_limit[0]}" if lane_limit is not None else
                     f"{lane_profile} profile's maximum of {max(allowed)}")
            raise ValueError(f"lanes={lanes} in endpoint item {item!r} is above the "
                             f"{bound}")
        if lanes not in allowed:
            raise ValueError(f"lanes={lanes} in endpoint item {item!r} is not a lane count "
                             f"of the {lane_profile} profile "
                             f"({', '.join(map(str, allowed))})")
        if count == 0:
            raise ValueError(f"count=0 in endpoint item {item!r}: give at least 1 endpoint")
        groups.append(EndpointGroup(kind, lanes, count))
    total = sum(g.count for g in groups)
    if total > switch_ports:
        raise ValueError(f"endpoints={text!r} lists {total} endpoints, more than the "
                         f"switch's {switch_ports} ports")
    if total < 2:
        raise ValueError(f"endpoints={text!r} lists {total} endpoint; the switch needs at "
                         "least 2")
    return tuple(groups)


def expand(groups) -> list[Endpoint]:
    """One :class:`Endpoint` per endpoint, numbered in the order of ``groups``."""
    out: list[Endpoint] = []
    for g in groups:
        for _ in range(g.count):
            out.append(Endpoint(len(out), g.kind, g.lanes))
    return out


def format_endpoints(groups) -> str:
    """The canonical text of ``groups`` (``parse_endpoints`` of it gives them back)."""
    return ",".join(str(g) for g in groups)


#: Lanes per direction a link of the RTL fabric takes, per lane profile: the chiplet moves
#: one 128-bit slot per cycle, which 2 lanes carry (1 lane: a slot every two cycles); the
#: fabric's FEC links are built for 2 lanes.
FABRIC_LANES = {"64b66b": (1, 2), "rs544": (2,)}


def check_fabric_lanes(lanes, lane_profile: str = "64b66b", name: str = "n_lanes",
                       where: str = "") -> None:
    """``ValueError`` (one line: ``{name}={lanes}{where}: ...``) unless the RTL fabric builds
    ``lanes`` lanes per direction with ``lane_profile``."""
    max_lanes(lane_profile)
    allowed = FABRIC_LANES[lane_profile]
    if isinstance(lanes, bool) or lanes not in allowed:
        only = " or ".join(map(str, allowed))
        raise ValueError(f"{name}={lanes!r}{where}: the fabric's {lane_profile} links take {only} "
                         "lanes per direction" + (" only" if len(allowed) == 1 else ""))


def fabric_kwargs(groups, lane_profile: str = "64b66b") -> dict:
    """``{"n_endpoints": N, "cpu_endpoints": (...), "endpoint_lanes": (...)}`` for
    ``Fabric`` from parsed groups; ``ValueError`` naming the item whose lanes the fabric
    does not build with ``lane_profile`` (:data:`FABRIC_LANES`)."""
    for g in groups:
        check_fabric_lanes(g.lanes, lane_profile, "lanes", f" in endpoint item '{g}'")
    eps = expand(groups)
    return {"n_endpoints": len(eps),
            "cpu_endpoints": tuple(e.index for e in eps if e.kind == "cpu"),
            "endpoint_lanes": tuple(e.lanes for e in eps)}
