"""The fabric: endpoints' chiplets → PCS → faulty lanes → PCS → switch-side chiplets →
bridges → switch with reduction units, and back (docs/fabric.md)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from fusionfabric.rtl.chiplet import Chiplet, PcsToPhy, PhyToPcs
from fusionfabric.rtl.chiplet.common import STATUS, port_layout
from fusionfabric.rtl.fec.pcs_rx import FecPcsRx, rx_latency
from fusionfabric.rtl.fec.pcs_tx import FecPcsTx
from fusionfabric.rtl.pcs import PcsRx, PcsTx
from fusionfabric.rtl.switch.group_table import config_layout
from fusionfabric.rtl.switch.top import Switch, stats_layout, unit_stats_layout
from fusionfabric.formats.bitfields import Fields
from fusionfabric.formats.chiplet import SLOT_BITS, ChipletParams
from fusionfabric.formats.fec_pcs import check_params as fec_check
from fusionfabric.formats.memory import MEM_STATUS
from fusionfabric.formats.pcs import check_params as pcs_check

from .admission import MAX_MSG_FLITS, DestAdmission
from .bridge import EgressBridge, IngressBridge
from .fault import LaneFault
from .memory import MemTarget

__all__ = ["Fabric", "SWITCH_MODES", "LINK_STATUS", "FEC_STATUS", "FAULT", "LANE_PROFILES",
           "link_status_layout", "fec_status_layout", "fault_layout", "UP", "DOWN",
           "lane_index", "lane_bits", "endpoint_lanes"]

#: The switch designs the fabric is built and tested with (``Switch``'s ``mode``).
SWITCH_MODES = ("voq", "crosspoint")

#: Link directions: UP = endpoint → switch, DOWN = switch → endpoint.
UP, DOWN = 0, 1

#: Per-endpoint PHY status (``o_link[e]``), LSB first. ``*_drops`` counts falls of the
#: PCS receiver's ``o_link_up`` (each one is followed by a relock).
LINK_STATUS = Fields([("up_link", 1), ("down_link", 1), ("up_drops", 16), ("down_drops", 16),
                      ("up_slips", 16), ("down_slips", 16), ("up_decode_errors", 16),
                      ("down_decode_errors", 16), ("up_bip_errors", 16),
                      ("down_bip_errors", 16)])

#: Per-endpoint FEC receiver counters (``o_fec[e]``, lane profile ``rs544`` only), LSB
#: first: codewords decoded, codewords with corrected symbols, symbols corrected,
#: uncorrectable codewords, and symbols corrected per logical lane, per direction
#: (:class:`fusionfabric.rtl.fec.pcs_rx.FecPcsRx`'s saturating counters).
FEC_STATUS = Fields([(f"{d}_{f}", 32) for d in ("up", "down")
                     for f in ("codewords", "corrected_codewords", "corrected_symbols",
                               "uncorrectable", "symbol_errors0", "symbol_errors1")])

#: Lane profiles of the fabric's links: ``64b66b`` (docs/pcs.md, 66-bit lanes, cl. 82
#: markers) and ``rs544`` (docs/fec.md, 256b/257b + RS(544,514) FEC lanes).
LANE_PROFILES = ("64b66b", "rs544")

#: Payload of ``i_fault``: one lane's fault settings (``all``: every lane), LSB first.
FAULT = Fields([("lane", 8), ("all", 1), ("threshold", 32), ("dark", 1), ("slip", 7)])


def link_status_layout() -> data.StructLayout:
    return LINK_STATUS.layout()


def fault_layout() -> data.StructLayout:
    return FAULT.layout()


def fec_status_layout() -> data.StructLayout:
    return FEC_STATUS.layout()


def lane_index(endpoint: int, direction: int, lane: int, n_lanes: int = 2,
               lanes=None) -> int:
    """The ``i_fault.lane`` / ``o_flips`` index of a lane: the lanes of endpoint 0 (up,
    then down), then those of endpoint 1, and so on. ``lanes``: every endpoint's lanes per
    direction (:func:`endpoint_lanes`); None: ``n_lanes`` each, ``(2 e + d) n_lanes + k``."""
    if lanes is None:
        return (2 * endpoint + direction) * n_lanes + lane
    return 2 * sum(lanes[:endpoint]) + direction * lanes[endpoint] + lane


def endpoint_lanes(params: dict) -> tuple[int, ...]:
    """Every endpoint's lanes per direction from the ``fabric`` block parameters
    (``n_endpoints``, ``n_lanes``, ``endpoints``, ``lane_profile``; defaults for the ones
    missing), as :class:`Fabric` builds them."""
    text = params.get("endpoints") or ""
    if text:
        from fusionfabric.endpoints import fabric_kwargs, parse_endpoints
        profile = params.get("lane_profile", "64b66b")
        return fabric_kwargs(parse_endpoints(text, lane_profile=profile),
                             profile)["endpoint_lanes"]
    return (int(params.get("n_lanes", 2)),) * int(params.get("n_endpoints", 8))


def lane_bits(lane_profile: str = "64b66b", fec_symbols: int = 8, n_lanes: int = 2) -> int:
    """Bits per cycle of one lane: 66 (``64b66b``) or ``10 * fec_symbols / n_lanes``
    (``rs544``); the ``width`` of its :class:`~.fault.LaneFault` (and of
    :func:`~.fault.ber_threshold`)."""
    if lane_profile == "64b66b":
        return 66
    if lane_profile == "rs544":
        return 10 * fec_symbols // n_lanes
    raise ValueError(f"lane_profile={lane_profile!r} must be one of {LANE_PROFILES}")


class Fabric(wiring.Component):
    """``n_endpoints`` accelerators through chiplets, PCS lanes and one switch.

    Per endpoint ``e``: accelerator-side :class:`fusionfabric.rtl.chiplet.Chiplet` (node ``e``) →
    :class:`~rtl.chiplet.PhyToPcs` → PCS transmitter (``lanes[e]`` lanes) → per lane a
    :class:`~rtl.fabric.fault.LaneFault` (bit errors, slip, dark, cable ``latency``) →
    PCS receiver → :class:`~rtl.chiplet.PcsToPhy` → switch-side ``Chiplet``
    (``stamp_src=False``) → :class:`~rtl.fabric.bridge.IngressBridge` → switch port ``e``;
    and back: switch egress ``e`` → :class:`~rtl.fabric.bridge.EgressBridge` → switch-side
    chiplet → PCS → lanes → PCS → endpoint chiplet. Each chiplet's ``i_link_up`` is its PCS
    receiver's ``o_link_up``. The switch is :class:`fusionfabric.rtl.switch.top.Switch` with
    ``data_width=128`` and ``reduce=True``.

    The PCS follows ``lane_profile``:

    * ``64b66b``: :class:`fusionfabric.rtl.pcs.PcsTx`/:class:`~fusionfabric.rtl.pcs.PcsRx`,
      66-bit lanes with cl. 82 markers (docs/pcs.md), 1 or 2 lanes per direction per
      endpoint: a 128-bit slot per cycle on 2 lanes, every other cycle on 1 (the PHY
      adapters' ``n_lanes``; the chiplet waits).
    * ``rs544``: :class:`fusionfabric.rtl.fec.pcs_tx.FecPcsTx`/
      :class:`~fusionfabric.rtl.fec.pcs_rx.FecPcsRx` with ``symbols = fec_symbols``
      (P, 4 or 8) and ``am_period = fec_am_period`` codewords: 256b/257b transcoding and
      RS(544,514) over two lanes of ``10 P / 2`` bits per cycle (docs/fec.md). The line
      carries ``10 P`` bits per cycle, so a direction takes at most
      ``10 P * 514/544 * 256/257 / 128`` rows per cycle (0.588 at P = 8, the PCS's
      ``i_data.ready``; the chiplet waits). Uncorrectable codewords reach the chiplet as
      ERROR control words: it drops the DL flit and the replay resends it. With
      ``replay_timeout`` = 0 the replay timer is the chiplet's default plus the FEC round
      trip (``2 * (12 + FecPcsRx.latency + latency)`` cycles). ``o_link`` maps the
      receiver's lane lock losses to ``*_slips`` and its uncorrectable codewords to
      ``*_decode_errors`` (``*_bip_errors`` stay 0); ``o_fec`` has its counters.

    Parameters
    ----------
    n_endpoints : int
        Endpoints = switch ports (2..128).
    n_lanes : int
        Lanes per direction of every endpoint without an endpoint list: 2 (a 128-bit slot
        is one row of two 64-bit words) or 1 (``64b66b`` only: a slot in two rows).
    lane_profile : str
        ``64b66b`` (default) or ``rs544``.
    am_period, max_skew, ber_window : int
        PCS parameters (``fusionfabric.rtl.pcs``; ``64b66b``). With ``rs544``,
        ``max_skew`` is the FEC receiver's deskew in symbols; the others are unused.
    fec_symbols, fec_am_period : int
        FEC PCS parameters (``rs544``): P, codeword symbols per cycle over both lanes
        (4 or 8; a 2-word row must carry the line's client capacity), and codewords per
        alignment-marker period (>= 2).
    latency : int
        Cable delay in cycles (register stages in each lane).
    tl_per_dl, replay_depth, rx_credits, replay_timeout, close_timeout : int
    replay_limit, link_timeout, retrain_holdoff, cpl_timeout : int
        Chiplet parameters (``fusionfabric.rtl.chiplet``), the same on both sides of every link;
        kept as one :class:`~fusionfabric.formats.chiplet.ChipletParams`, ``self.chiplet_params``.
        With ``replay_timeout`` = 0 the replay timer of a 1-lane link's chiplets counts
        its flit times at that link's rate: ``8 * 2 * flit_slots + 64`` cycles
        (``self.link_params[e]``).
    depth, iterations, out_depth, n_groups, n_chunks : int
        Switch parameters (``fusionfabric.rtl.switch``; ``iterations`` 0 = default).
    switch_mode : str
        The switch design (``Switch``'s ``mode``, :data:`SWITCH_MODES`): ``"voq"`` (the
        default, the design the cycle-level model follows) or ``"crosspoint"`` (the
        crosspoint-buffered switch, the faster of the two on an FPGA: docs/switch.md;
        ``iterations`` must be 0).
    result_timeout : int
        Cycles a partial RESULT message waits for more results (``ResultPacker``).
    fault_seed : int
        Seed of the lane error generators (each lane gets its own stream).
    dest_credits : int
        Per-destination admission (docs/fabric.md, "Admission per destination"): 0 (the
        default) for none, the Verilog unchanged; otherwise switch flits per destination,
        17..``depth``: a :class:`~.admission.DestAdmission` between each accelerator's
        ``i_req``/``o_rsp`` and its chiplet holds a request whose destination has that many
        flits without a completion, so no VOQ at the switch fills and holds up a link.
    cpu_endpoints : tuple of int
        Constructor option (not a block parameter): the endpoints of kind ``cpu``
        (``fusionfabric.endpoints``), each with a :class:`~.memory.MemTarget` of
        ``mem_bytes`` behind its chiplet (docs/fabric.md, "Memory target"); empty (the
        default): every endpoint is an accelerator, and the Verilog is unchanged.
    mem_bytes : int
        Memory size of each cpu endpoint's target (also a block parameter).
    endpoints : str
        Block parameter: an endpoint list (``accelerator:1x6,gpu:2x2,cpu:1x1``,
        :func:`fusionfabric.endpoints.parse_endpoints`; lanes 1 or 2 with ``64b66b``, 2
        with ``rs544``) that sets ``n_endpoints`` (which must then be left at 8 or equal
        the list's count), ``cpu_endpoints`` and ``endpoint_lanes``; empty (the default):
        ``n_endpoints`` accelerators of ``n_lanes`` lanes.
    endpoint_lanes : tuple of int
        Constructor option (not a block parameter): lanes per direction of each endpoint
        (1 or 2; ``self.lanes``); empty (the default): ``n_lanes`` each.

    Members
    -------
    i_req, i_rsp : In(stream.Signature(PORT_BEAT)).array(n_endpoints)
        Accelerator ``e``'s requests and the responses it owes (its chiplet's ports).
    o_req, o_rsp : Out(stream.Signature(PORT_BEAT)).array(n_endpoints)
        Requests for accelerator ``e`` and responses to its requests.
    i_config : In(stream.Signature(config_layout(n_endpoints)))
        Switch group-table writes (``fusionfabric.formats.switch.group_entry``), always ready.
    i_fault : In(stream.Signature(fault_layout()))
        Lane fault settings, always ready: writes ``threshold`` and ``dark`` of lane
        ``lane`` (:func:`lane_index`; ``all``: every lane) and slips it by ``slip`` bits
        if ``slip`` is not 0.
    o_ep_status, o_sw_status : Out(STATUS).array(n_endpoints)
        Endpoint-side and switch-side chiplet status of link ``e``.
    o_link : Out(link_status_layout()).array(n_endpoints)
        PCS link-up, link drops (relocks), slips, decode and BIP errors per direction.
    o_fec : Out(fec_status_layout()).array(n_endpoints)
        Only with ``lane_profile="rs544"``: the FEC receivers' counters (:data:`FEC_STATUS`).
    o_flips : Out(32).array(2 * sum(lanes))
        Bits flipped per lane (:func:`lane_index`; ``4 * n_endpoints`` with 2 lanes each).
    o_stats, o_unit_stats, o_config_drops :
        The switch's counters (docs/switch.md).
    o_bridge_drops : Out(16).array(n_endpoints)
        Flits of unexpected kind dropped by egress bridge ``e``.
    o_dest_ready : Out(n_endpoints).array(n_endpoints)
        Only with ``dest_credits``: bit ``d`` of entry ``e`` is high when accelerator ``e``
        may send a message of any size to ``d`` without waiting
        (:class:`~.admission.DestAdmission`'s ``o_dest_ready``).
    o_mem_status : Out(MEM_STATUS).array(len(cpu_endpoints))
        Only with cpu endpoints: the counters of the target of ``cpu_endpoints[k]``. A
        cpu endpoint's chiplet delivers its requests to the target and takes its
        completions from it, so that endpoint's ``o_req`` stays idle (valid 0, payload
        0) and its ``i_rsp`` is not read (ready 0); its ``i_req`` and ``o_rsp`` are
        connected as for an accelerator (the host of a cpu endpoint may send requests).

    Timing
    ------
    After reset the links train (PCS block lock, marker lock, deskew, then the DL bring-up);
    with ``am_period = 64`` all links are up after about 400 cycles; with ``rs544`` the
    FEC lock takes two marker periods (``2 * fec_am_period * 544 / P`` cycles plus the
    receiver's latency). Measured end-to-end
    latencies (first request beat in → first beat out at the destination, idle fabric,
    default parameters) are in docs/fabric.md ("Latency"). Throughput per endpoint and
    direction: one 16-byte slot per cycle (2 lanes; half of it with 1 lane) less the DL,
    PCS and bridge overheads.
    Reset: everything (both ends of every link reset together, as the chiplet requires).
    """

    def __init__(self, n_endpoints: int = 8, n_lanes: int = 2, am_period: int = 64,
                 max_skew: int = 2, ber_window: int = 4096, latency: int = 4,
                 tl_per_dl: int = 4, replay_depth: int = 8, rx_credits: int = 16,
                 replay_timeout: int = 0, close_timeout: int = 8, depth: int = 16,
                 iterations: int = 0, out_depth: int = 4, n_groups: int = 16,
                 n_chunks: int = 16, result_timeout: int = 8, fault_seed: int = 1,
                 replay_limit: int = 16, link_timeout: int = 0, retrain_holdoff: int = 0,
                 cpl_timeout: int = 65536, lane_profile: str = "64b66b",
                 fec_symbols: int = 8, fec_am_period: int = 8, dest_credits: int = 0,
                 switch_mode: str = "voq", *,
                 cpu_endpoints=(),
                 mem_bytes: int = 4096, endpoints: str = "", endpoint_lanes=()):
        from fusionfabric.formats.memory import check_mem_bytes
        check_mem_bytes(mem_bytes)          # checked with or without a cpu endpoint
        if endpoints:
            # an endpoint list (fusionfabric/endpoints.py) sets n_endpoints and the cpus
            from fusionfabric.endpoints import fabric_kwargs, parse_endpoints
            if lane_profile not in LANE_PROFILES:
                raise ValueError(f"lane_profile={lane_profile!r} must be one of "
                                 f"{', '.join(LANE_PROFILES)}")
            kw = fabric_kwargs(parse_endpoints(endpoints, lane_profile=lane_profile),
                               lane_profile)
            if n_endpoints not in (8, kw["n_endpoints"]):
                raise ValueError(f"endpoints={endpoints!r} lists {kw['n_endpoints']} "
                                 f"endpoints but n_endpoints={n_endpoints}: give one of the "
                                 "two")
            if tuple(cpu_endpoints):
                raise ValueError("give the cpu endpoints in endpoints= or cpu_endpoints, "
                                 "not both")
            if n_lanes != 2 or tuple(endpoint_lanes):
                raise ValueError(f"n_lanes={n_lanes!r}: give the lanes in endpoints= "
                                 f"({endpoints!r}) or n_lanes, not both")
            n_endpoints, cpu_endpoints = kw["n_endpoints"], kw["cpu_endpoints"]
            endpoint_lanes = kw["endpoint_lanes"]
        if not isinstance(n_endpoints, int) or not 2 <= n_endpoints <= 128:
            raise ValueError(f"n_endpoints={n_endpoints!r} must be an integer in 2..128")
        if lane_profile not in LANE_PROFILES:
            raise ValueError(f"lane_profile={lane_profile!r} must be one of "
                             f"{', '.join(LANE_PROFILES)}")
        from fusionfabric.endpoints import check_fabric_lanes
        check_fabric_lanes(n_lanes, lane_profile)
        lanes = tuple(endpoint_lanes) or (n_lanes,) * n_endpoints
        if len(lanes) != n_endpoints:
            raise ValueError(f"endpoint_lanes={lanes!r} has {len(lanes)} entries for "
                             f"n_endpoints={n_endpoints}")
        for e, k in enumerate(lanes):
            check_fabric_lanes(k, lane_profile, "lanes", f" of endpoint {e}")
        if not isinstance(latency, int) or latency < 0:
            raise ValueError(f"latency={latency!r} must be a non-negative integer")
        if not isinstance(result_timeout, int) or not 1 <= result_timeout <= 255:
            raise ValueError(f"result_timeout={result_timeout!r} must be an integer in 1..255")
        if not isinstance(fault_seed, int) or fault_seed < 0:
            raise ValueError(f"fault_seed={fault_seed!r} must be a non-negative integer")
        self.lane_profile = lane_profile
        self.fec_symbols, self.fec_am_period = fec_symbols, fec_am_period
        fec_rtt = 0
        # the FEC parameters are checked whatever the profile (a bad value never passes)
        if fec_symbols not in (4, 8):
            raise ValueError(f"fec_symbols={fec_symbols!r} must be 4 or 8 (two lanes, "
                             "a row of two words per cycle at most)")
        if not isinstance(fec_am_period, int) or fec_am_period < 2:
            raise ValueError(f"fec_am_period={fec_am_period!r} must be an integer >= 2 "
                             "(codewords per marker period)")
        fec_check(2, fec_symbols, 2, fec_am_period)
        if lane_profile == "rs544":
            half = fec_am_period * 544 // 2 // 2
            if not isinstance(max_skew, int) or not 0 <= max_skew < half:
                raise ValueError(f"max_skew={max_skew!r} must be in 0..{half - 1} symbols "
                                 f"(under half a marker period of fec_am_period="
                                 f"{fec_am_period})")
            self.fec_latency = rx_latency(2, fec_symbols)
            fec_rtt = 2 * (12 + self.fec_latency + latency)
        self.lane_bits = lane_bits(lane_profile, fec_symbols, 2 if lane_profile == "rs544"
                                   else n_lanes)
        if replay_timeout == 0 and fec_rtt:
            base = ChipletParams(tl_per_dl=tl_per_dl).timeout
            replay_timeout = min(65535, base + fec_rtt)
        self.chiplet_params = ChipletParams(tl_per_dl=tl_per_dl, replay_depth=replay_depth,
                                            rx_credits=rx_credits,
                                            replay_timeout=replay_timeout,
                                            replay_limit=replay_limit,
                                            link_timeout=link_timeout,
                                            retrain_holdoff=retrain_holdoff,
                                            cpl_timeout=cpl_timeout,
                                            close_timeout=close_timeout)
        # a 1-lane link's flits take twice as many cycles: a derived replay timer counts
        # its flit times at that rate (the link-lost timeout and holdoff follow from it)
        slow = replace(self.chiplet_params,
                       replay_timeout=self.chiplet_params.timeout
                       + 8 * self.chiplet_params.flit_slots) if replay_timeout == 0 else \
            self.chiplet_params
        self.link_params = tuple(self.chiplet_params if k == 2 else slow for k in lanes)
        self.n_endpoints = n_endpoints
        self.n_lanes = n_lanes
        self.lanes = lanes
        self.am_period = am_period
        self.max_skew = max_skew
        self.ber_window = ber_window
        self.latency = latency
        self.result_timeout = result_timeout
        self.fault_seed = fault_seed
        n = n_endpoints
        # built here so that bad parameters fail before elaboration
        if not isinstance(dest_credits, int) or not (
                dest_credits == 0 or MAX_MSG_FLITS <= dest_credits <= depth):
            raise ValueError(f"dest_credits={dest_credits!r} must be 0 (no admission) or "
                             f"an integer in {MAX_MSG_FLITS}..depth={depth} (switch flits "
                             f"per destination, at most a VOQ)")
        self.dest_credits = dest_credits
        if switch_mode not in SWITCH_MODES:
            raise ValueError(f"switch_mode={switch_mode!r} must be one of "
                             f"{', '.join(SWITCH_MODES)}")
        self.switch_mode = switch_mode
        self.switch = Switch(n_ports=n, data_width=SLOT_BITS, depth=depth,
                             iterations=iterations or None, mode=switch_mode,
                             out_depth=out_depth,
                             n_groups=n_groups, reduce=True, n_chunks=n_chunks)
        if lane_profile == "64b66b":
            for k in sorted(set(lanes)):
                pcs_check(k, am_period, max_skew, ber_window)
        self.n_fault_lanes = 2 * sum(lanes)
        cpus = tuple(cpu_endpoints)
        bad = [c for c in cpus if not isinstance(c, int) or isinstance(c, bool)
               or not 0 <= c < n]
        if bad:
            raise ValueError(f"cpu_endpoints entry {bad[0]!r} is not an endpoint in 0..{n - 1}")
        if len(set(cpus)) != len(cpus):
            raise ValueError(f"cpu_endpoints={cpus!r} lists an endpoint twice")
        self.cpu_endpoints = cpus
        self.mem_bytes = mem_bytes
        self.mem_targets = {c: MemTarget(mem_bytes) for c in cpus}
        mem = {"o_mem_status": Out(MEM_STATUS.layout()).array(len(cpus))} if cpus else {}
        beat = stream.Signature(port_layout())
        fec = {"o_fec": Out(fec_status_layout()).array(n)} if lane_profile == "rs544" else {}
        adm = {"o_dest_ready": Out(n).array(n)} if dest_credits else {}
        super().__init__({
            "i_req": In(beat).array(n),
            "i_rsp": In(beat).array(n),
            "o_req": Out(beat).array(n),
            "o_rsp": Out(beat).array(n),
            "i_config": In(stream.Signature(config_layout(n))),
            "i_fault": In(stream.Signature(fault_layout())),
            "o_ep_status": Out(STATUS.layout()).array(n),
            "o_sw_status": Out(STATUS.layout()).array(n),
            "o_link": Out(link_status_layout()).array(n),
            "o_flips": Out(32).array(self.n_fault_lanes),
            "o_stats": Out(stats_layout()).array(n),
            "o_unit_stats": Out(unit_stats_layout()).array(n),
            "o_config_drops": Out(32),
            "o_bridge_drops": Out(16).array(n),
            **fec,
            **mem,
            **adm,
        })

    def _flat_io(self, e, sw):
        """The wires of endpoint ``e``'s path inside this flat fabric (:meth:`_endpoint`)."""
        def lane(d, k):
            idx = lane_index(e, d, k, lanes=self.lanes)
            lf = LaneFault(seed=self.fault_seed * 1000003 + idx, latency=self.latency,
                           width=self.lane_bits)
            return lf, idx, self.o_flips[idx]
        return SimpleNamespace(
            fault=self.i_fault, node_id=e, lane=lane, i_req=flipped(self.i_req[e]),
            i_rsp=flipped(self.i_rsp[e]), o_req=flipped(self.o_req[e]),
            o_rsp=flipped(self.o_rsp[e]), rsp_ready=self.i_rsp[e].ready,
            to_switch=sw.i_port[e], from_switch=sw.o_port[e],
            ep_status=self.o_ep_status[e], sw_status=self.o_sw_status[e],
            link=self.o_link[e], fec=self.o_fec[e] if self.lane_profile == "rs544" else None,
            mem=self.mem_targets.get(e),
            mem_status=(self.o_mem_status[self.cpu_endpoints.index(e)]
                        if e in self.mem_targets else None),
            stats=[self.o_stats[e].eq(sw.o_stats[e]),
                   self.o_unit_stats[e].eq(sw.o_unit_stats[e])],
            bridge_drops=self.o_bridge_drops[e],
            dest_ready=self.o_dest_ready[e] if self.dest_credits else None)

    def _direction(self, m, name, src, dst, e, d, io):
        """src chiplet → PCS → lanes (faults) → PCS → dst chiplet; returns the PcsRx."""
        n_lanes = self.lanes[e]
        if n_lanes == 2:
            tx_ad = PhyToPcs(tl_per_dl=self.chiplet_params.tl_per_dl)
        else:
            tx_ad = PhyToPcs(tl_per_dl=self.chiplet_params.tl_per_dl, n_lanes=n_lanes)
        if self.lane_profile == "rs544":
            fec = dict(n_lanes=n_lanes, symbols=self.fec_symbols, n_words=2,
                       am_period=self.fec_am_period)
            tx = FecPcsTx(**fec)
            rx = FecPcsRx(**fec, max_skew=self.max_skew)
        else:
            tx = PcsTx(n_lanes=n_lanes, am_period=self.am_period)
            rx = PcsRx(n_lanes=n_lanes, am_period=self.am_period, max_skew=self.max_skew,
                       ber_window=self.ber_window)
        if n_lanes == 2:
            rx_ad = PcsToPhy(tl_per_dl=self.chiplet_params.tl_per_dl)
        else:
            rx_ad = PcsToPhy(tl_per_dl=self.chiplet_params.tl_per_dl, n_lanes=n_lanes)
        m.submodules[f"{name}_txad"] = tx_ad
        m.submodules[f"{name}_pcstx"] = tx
        m.submodules[f"{name}_pcsrx"] = rx
        m.submodules[f"{name}_rxad"] = rx_ad
        connect(m, src.o_phy, tx_ad.i_word)
        # the row is zero while not valid: an X payload (a DL register never written)
        # would otherwise freeze Icarus's evaluation of the PCS's word mux
        m.d.comb += [tx.i_data.valid.eq(tx_ad.o_row.valid),
                     tx_ad.o_row.ready.eq(tx.i_data.ready),
                     tx.i_data.payload.eq(Mux(tx_ad.o_row.valid, tx_ad.o_row.payload, 0))]
        cfg = io.fault
        for k in range(n_lanes):
            lf, idx, flips = io.lane(d, k)
            m.submodules[f"{name}_lane{k}"] = lf
            threshold = Signal(32, name=f"{name}_threshold{k}")
            dark = Signal(name=f"{name}_dark{k}")
            hit = cfg.valid & (cfg.payload.all | (cfg.payload.lane == idx))
            with m.If(hit):
                m.d.sync += [threshold.eq(cfg.payload.threshold), dark.eq(cfg.payload.dark)]
            m.d.comb += [lf.i_lane.eq(tx.o_lanes[k]), rx.i_lanes[k].eq(lf.o_lane),
                         lf.i_threshold.eq(threshold), lf.i_dark.eq(dark),
                         lf.i_slip_valid.eq(hit & (cfg.payload.slip != 0)),
                         lf.i_slip_bits.eq(cfg.payload.slip),
                         flips.eq(lf.o_flips)]
        m.d.comb += [rx_ad.i_row.valid.eq(rx.o_data.valid),
                     rx_ad.i_row.payload.eq(rx.o_data.payload),
                     rx_ad.i_link_up.eq(rx.o_link_up)]
        connect(m, rx_ad.o_word, dst.i_phy)
        return rx

    def _endpoint(self, m, e, io, tag=None):
        """Endpoint ``e``'s whole path, between its accelerator ports and its switch port,
        into ``m``: the two chiplets, both link directions, the memory target of a cpu
        endpoint, the bridges and the PHY status counters. ``io`` holds the wires it
        connects to (:meth:`_flat_io` here, :class:`~.split.EndpointLink`'s ports there);
        ``tag`` names its submodules and signals (default: ``e``)."""
        tag = e if tag is None else tag
        ep = Chiplet.from_params(self.link_params[e])
        sc = Chiplet.from_params(replace(self.link_params[e], stamp_src=False))
        m.submodules[f"ep{tag}"] = ep
        m.submodules[f"sc{tag}"] = sc
        up = self._direction(m, f"up{tag}", ep, sc, e, UP, io)
        down = self._direction(m, f"down{tag}", sc, ep, e, DOWN, io)
        m.d.comb += [ep.i_node_id.eq(io.node_id), sc.i_node_id.eq(io.node_id),
                     ep.i_link_up.eq(down.o_link_up), sc.i_link_up.eq(up.o_link_up),
                     io.ep_status.eq(ep.o_status),
                     io.sw_status.eq(sc.o_status)]
        ep_rsp = ep.o_rsp
        if self.dest_credits:
            # per-destination admission between the accelerator and its chiplet
            adm = DestAdmission(self.n_endpoints, self.dest_credits)
            m.submodules[f"admit{tag}"] = adm
            connect(m, io.i_req, adm.i_req)
            connect(m, adm.o_req, ep.i_req)
            connect(m, ep.o_rsp, adm.i_rsp)
            ep_rsp = adm.o_rsp
            m.d.comb += io.dest_ready.eq(adm.o_dest_ready)
        else:
            connect(m, io.i_req, ep.i_req)
        if io.mem is not None:
            # a cpu endpoint: the memory target serves the requests that reach it
            mt = io.mem
            m.submodules[f"mem{tag}"] = mt
            connect(m, mt.o_rsp, ep.i_rsp)
            connect(m, ep.o_req, mt.i_req)
            m.d.comb += [mt.i_node_id.eq(io.node_id), io.rsp_ready.eq(0),
                         io.mem_status.eq(mt.o_status)]
        else:
            connect(m, io.i_rsp, ep.i_rsp)
            connect(m, ep.o_req, io.o_req)
        connect(m, ep_rsp, io.o_rsp)
        ing = IngressBridge()
        egr = EgressBridge(self.n_endpoints, self.result_timeout)
        m.submodules[f"ingress{tag}"] = ing
        m.submodules[f"egress{tag}"] = egr
        connect(m, sc.o_req, ing.i_req)
        connect(m, sc.o_rsp, ing.i_rsp)
        connect(m, ing.o_flit, io.to_switch)
        connect(m, io.from_switch, egr.i_flit)
        connect(m, egr.o_req, sc.i_req)
        connect(m, egr.o_rsp, sc.i_rsp)
        m.d.comb += [*io.stats, io.bridge_drops.eq(egr.o_drops)]
        # PHY status
        ls = io.link
        for dname, rx in (("up", up), ("down", down)):
            link = getattr(ls, f"{dname}_link")
            drops = Signal(16, name=f"{dname}{tag}_drops")
            was = Signal(name=f"{dname}{tag}_was_up")
            m.d.sync += was.eq(rx.o_link_up)
            m.d.comb += [link.eq(rx.o_link_up), getattr(ls, f"{dname}_drops").eq(drops)]
            with m.If(was & ~rx.o_link_up & (drops != 0xFFFF)):
                m.d.sync += drops.eq(drops + 1)
            if self.lane_profile == "rs544":
                fs = io.fec
                m.d.comb += [getattr(ls, f"{dname}_slips").eq(rx.o_relocks),
                             getattr(ls, f"{dname}_decode_errors").eq(rx.o_uncorrectable)]
                for f in ("codewords", "corrected_codewords", "corrected_symbols",
                          "uncorrectable"):
                    m.d.comb += getattr(fs, f"{dname}_{f}").eq(getattr(rx, f"o_{f}"))
                for k in range(self.lanes[e]):
                    m.d.comb += getattr(fs, f"{dname}_symbol_errors{k}").eq(
                        rx.o_symbol_errors[k])
                continue
            slips = sum(rx.o_slips[k] for k in range(self.lanes[e]))
            bips = sum(rx.o_bip_errors[k] for k in range(self.lanes[e]))
            m.d.comb += [getattr(ls, f"{dname}_slips").eq(slips),
                         getattr(ls, f"{dname}_bip_errors").eq(bips),
                         getattr(ls, f"{dname}_decode_errors").eq(rx.o_decode_errors)]

    def elaborate(self, platform):
        m = Module()
        n = self.n_endpoints
        m.submodules.switch = sw = self.switch
        connect(m, flipped(self.i_config), sw.i_config)
        m.d.comb += self.i_fault.ready.eq(1)
        m.d.comb += self.o_config_drops.eq(sw.o_config_drops)
        for e in range(n):
            self._endpoint(m, e, self._flat_io(e, sw))
        return m


def _build(**params):
    return Fabric(**params)
