"""The fabric: endpoints, links through the PCS with lane faults, switch-side
chiplets, bridges and the reducing switch (docs/fabric.md)."""

from fusionfabric.rtl.blocks import Block, Param
from fusionfabric.rtl.chiplet import CHIPLET_PARAMS

from .bridge import EgressBridge, IngressBridge, Reassembly, ResultPacker
from .fabric import SWITCH_MODES, Fabric, _build
from .fault import LaneFault

__all__ = ["Fabric", "IngressBridge", "EgressBridge", "Reassembly", "ResultPacker",
           "LaneFault", "BLOCKS"]

BLOCKS = [
    Block("fabric", _build, doc="Endpoints → chiplets → PCS lanes (faults) → switch with "
          "reduction units (docs/fabric.md)", params=[
              Param("n_endpoints", int, 8, "endpoints = switch ports (2..128)"),
              Param("endpoints", str, "", "endpoint list KIND:LANESxCOUNT,... (e.g. "
                    "accelerator:1x6,gpu:2x2,cpu:1x1; lanes 1 or 2, rs544: 2): sets "
                    "n_endpoints and each endpoint's lanes and puts a memory target behind "
                    "each cpu endpoint; empty: n_endpoints accelerators of n_lanes lanes"),
              Param("mem_bytes", int, 4096, "bytes of each cpu endpoint's memory target "
                    "(a power of two, 64..2**20)"),
              Param("n_lanes", int, 2, "PCS lanes per direction of every endpoint without "
                    "an endpoint list: 2, or 1 (64b66b only; half the rate)",
                    choices=(1, 2)),
              Param("lane_profile", str, "64b66b", "PCS of every link: 64b66b (cl. 82 "
                    "markers) or rs544 (256b/257b + RS(544,514) FEC, docs/fec.md)",
                    choices=("64b66b", "rs544")),
              Param("am_period", int, 64, "PCS rows per alignment-marker period (64b66b)"),
              Param("max_skew", int, 2, "PCS receiver deskew, in blocks (64b66b) or "
                    "symbols (rs544)"),
              Param("ber_window", int, 4096, "PCS BER monitor window, in blocks"),
              Param("fec_symbols", int, 8, "rs544: RS symbols per cycle over both lanes "
                    "(4 or 8)", choices=(4, 8)),
              Param("fec_am_period", int, 8, "rs544: codewords per alignment-marker "
                    "period (>= 2)"),
              Param("latency", int, 4, "cable delay, cycles"),
              *[p for p in CHIPLET_PARAMS if p.name != "stamp_src"],
              Param("depth", int, 16, "switch flits per VOQ (power of two)"),
              Param("switch_mode", str, "voq", "switch design: voq (the model's) or "
                    "crosspoint (crosspoint-buffered, faster on an FPGA; iterations 0)",
                    choices=SWITCH_MODES),
              Param("iterations", int, 0, "switch iSLIP rounds (0 = default)"),
              Param("out_depth", int, 4, "switch output buffer slots"),
              Param("n_groups", int, 16, "switch group-table entries"),
              Param("n_chunks", int, 16, "open-chunk slots per reduction unit"),
              Param("result_timeout", int, 8, "cycles a partial RESULT message waits"),
              Param("fault_seed", int, 1, "seed of the lane error generators"),
              Param("dest_credits", int, 0, "per-destination admission at each "
                    "accelerator port: switch flits per destination in flight (17..depth, "
                    "at most a VOQ), returned by completions; 0: none"),
          ], ci_params={"n_endpoints": 2}),
]
