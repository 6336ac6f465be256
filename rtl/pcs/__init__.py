"""Multi-lane 64b/66b physical coding sublayer (IEEE 802.3 cl. 49 blocks, cl. 82 lanes).

- :class:`~rtl.pcs.tx.PcsTx` (block ``pcs-tx``): encode, scramble, stripe, alignment markers.
- :class:`~rtl.pcs.rx.PcsRx` (block ``pcs-rx``): block lock, marker lock, reorder, deskew,
  descramble, decode, per-lane status.
- :class:`~rtl.pcs.lock.BlockLock`: per-lane bit alignment and the cl. 49 lock FSM.
- :class:`~rtl.pcs.gearbox.TxGearbox`, :class:`~rtl.pcs.gearbox.RxGearbox`: 66-bit blocks
  to/from 32- or 64-bit SerDes words (``serdes_width``).
- :class:`~rtl.pcs.cl49.Cl49Tx`, :class:`~rtl.pcs.cl49.Cl49Rx` (blocks ``pcs-cl49-tx``,
  ``pcs-cl49-rx``): the clause-49 (10GBASE-R) profile, one lane, XGMII-style client.

The golden model is :mod:`fusionfabric.sim.pcs`; the formats and state machines are in ``docs/pcs.md``.
"""

from fusionfabric.rtl.blocks import Block, Param

from fusionfabric.formats.pcs import SERDES_WIDTHS

from .cl49 import Cl49Rx, Cl49Tx
from .gearbox import RxGearbox, TxGearbox
from .lock import BlockLock
from .rx import PcsRx
from .tx import PcsTx

__all__ = ["PcsTx", "PcsRx", "BlockLock", "TxGearbox", "RxGearbox", "Cl49Tx", "Cl49Rx",
           "BLOCKS"]

# The classes take 1..20 lanes (Table 82-2 has 20 marker values); the registry offers
# 1..8 so that the lint and generate sweeps stay quick (20 lanes take ~10 s to generate).
_N_LANES = Param("n_lanes", int, 4, "PCS lanes", choices=tuple(range(1, 9)))
_AM_PERIOD = Param("am_period", int, 16384, "rows per alignment-marker period (802.3: 16384)")
_SERDES = Param("serdes_width", int, 66, "bits per lane per cycle (66: one block; 32/64: "
                "gearbox)", choices=SERDES_WIDTHS)

BLOCKS = [
    Block("pcs-tx", PcsTx, doc="64b/66b multi-lane PCS transmitter with alignment markers",
          params=[_N_LANES, _AM_PERIOD, _SERDES]),
    Block("pcs-rx", PcsRx, doc="64b/66b multi-lane PCS receiver: lock, deskew, reorder",
          params=[_N_LANES, _AM_PERIOD,
                  Param("max_skew", int, 8, "lane skew absorbed, in blocks"),
                  Param("ber_window", int, 19531,
                        "BER monitor window in blocks (125 us at 10.3125 GBd)"),
                  _SERDES]),
    Block("pcs-cl49-tx", Cl49Tx, doc="10GBASE-R (clause 49) 64b/66b encoder + scrambler, "
          "XGMII-style client, one lane", params=[_SERDES]),
    Block("pcs-cl49-rx", Cl49Rx, doc="10GBASE-R (clause 49) block lock, descrambler, "
          "64b/66b decoder to XGMII-style vectors, one lane",
          params=[Param("ber_window", int, 19531,
                        "BER monitor window in blocks (125 us at 10.3125 GBd)"),
                  _SERDES]),
]
