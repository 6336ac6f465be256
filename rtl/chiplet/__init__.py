"""The chiplet interface: accelerator port, transaction layer, data-link layer (docs/protocol.md).

See docs/protocol.md. Formats come from :mod:`fusionfabric.formats.chiplet`.
"""

from fusionfabric.rtl.blocks import Block, Param

from .chiplet import Chiplet
from .dl_rx import DataLinkRx
from .dl_tx import DataLinkTx
from .phy import PcsToPhy, PhyToPcs
from .tl_rx import TransactionRx
from .tl_tx import TransactionTx
from .tracker import CompletionTracker

__all__ = ["Chiplet", "DataLinkTx", "DataLinkRx", "TransactionTx",
           "TransactionRx", "CompletionTracker", "PhyToPcs", "PcsToPhy", "BLOCKS", "CHIPLET_PARAMS"]

CHIPLET_PARAMS = [
    Param("tl_per_dl", int, 4, "64-byte TL flits per DL flit (1..32)"),
    Param("replay_depth", int, 8, "DL flits held for replay (power of two, 2..64)"),
    Param("rx_credits", int, 16, "receive buffer per VC, in TL flits (credits advertised)"),
    Param("replay_timeout", int, 0, "cycles without ack progress before replay (0: derived)"),
    Param("close_timeout", int, 8, "idle cycles before a partial DL flit is sent"),
    Param("stamp_src", bool, True, "stamp src with the node id (False: switch side, forwards)"),
    Param("replay_limit", int, 16, "rewinds without ack progress before FAILED (1..255)"),
    Param("link_timeout", int, 0, "cycles without a good flit before FAILED (0: derived)"),
    Param("retrain_holdoff", int, 0, "cycles FAILED before retraining (0: derived)"),
    Param("cpl_timeout", int, 65536, "cycles before a non-posted request completes with "
          "TIMEOUT (0: no timer)"),
]

BLOCKS = [
    Block("chiplet", Chiplet, params=CHIPLET_PARAMS,
          doc="Chiplet endpoint: accelerator port, TL (2 VCs), DL with replay and credits"),
]
