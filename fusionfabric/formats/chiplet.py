"""Formats of the chiplet link: TL and DL layouts, opcodes, widths and the link parameters.

Shared by the chiplet RTL (:mod:`fusionfabric.rtl.chiplet`, which builds its ``StructLayout``
views from these :class:`~fusionfabric.formats.bitfields.Fields`) and the numpy model
(:mod:`fusionfabric.sim.chiplet`, which packs and unpacks through them). The format is
specified in ``docs/protocol.md``.

Units: a slot is 128 bits (16 bytes, little-endian); a TL flit is 64 bytes = 4 slots of one
virtual channel; a DL flit is ``tl_per_dl`` TL flits and one trailer slot (96-bit DL header
and CRC-32).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from numbers import Integral

from .bitfields import Fields
from .switch import CHUNK_BITS, DEST_BITS, SRC_BITS

__all__ = [
    "SLOT_BITS", "SLOT_BYTES", "SLOTS_PER_TL", "TL_BYTES", "SEQ_BITS", "CREDIT_BITS",
    "GEN_BITS", "TAG_BITS", "ADDR_BITS", "MAX_TL_PER_DL", "SRC_BITS", "Opcode", "Status",
    "VC",
    "LENGTHS", "TL_HEADER", "PORT_BEAT", "DL_HEADER", "DL_TRAILER", "PHY_WORD", "TL_FLIT",
    "STATUS", "LinkState", "POSTED", "NON_POSTED", "dl_flit_slots", "check_tl_per_dl", "MAX_START_EVERY", "check_phy_params",
    "ChipletParams",
]

SLOT_BITS = 128
SLOT_BYTES = 16
SLOTS_PER_TL = 4
TL_BYTES = 64
#: Sequence-number width of DL flits (the space must exceed twice the replay window).
SEQ_BITS = 10
#: Width of the cumulative credit counters returned per VC (mod 2**CREDIT_BITS).
CREDIT_BITS = 12
#: Width of a DL's generation number (drops, failures and refreshes since its reset, mod
#: 2**GEN_BITS; docs/protocol.md, "Peer reset and link reset").
GEN_BITS = 4
TAG_BITS = 8
ADDR_BITS = 57
#: Largest ``tl_per_dl`` (the DL header holds one VC bit per TL flit).
MAX_TL_PER_DL = 32


class Opcode(IntEnum):
    NULL = 0          #: padding slot (only where a header is expected)
    WRITE = 1
    READ = 2
    ATOMIC_ADD = 3    #: element-wise int32 add of the payload into memory; acknowledged
    MULTICAST = 4     #: write to every member of group ``dest`` (posted)
    REDUCE = 5        #: contribute payload to group ``dest``, chunk ``chunk`` (posted)
    RESULT = 6        #: reduction results from the switch to a member (posted; sent only by
    #: the switch side of a fabric link, docs/fabric.md gives the chunk ids' placement)
    READ_CPL = 8      #: read completion with data
    WRITE_ACK = 9
    ATOMIC_ACK = 10


class Status(IntEnum):
    OK = 0
    ERROR = 1         #: e.g. address out of range at the completer
    UNSUPPORTED = 2
    #: made by the requester's own chiplet (``src`` = its node id), never by a completer:
    #: no completion came within ``cpl_timeout`` cycles (the request may or may not have
    #: been executed; a completion arriving later is dropped and counted, ``late_cpl``)
    TIMEOUT = 3


class VC(IntEnum):
    REQ = 0
    RSP = 1


#: Request/response lengths in bytes, by 2-bit ``length`` code.
LENGTHS = (64, 128, 192, 256)

#: The TL header slot (one slot, LSB first).
TL_HEADER = Fields([
    ("opcode", 4),
    ("length", 2),        # LENGTHS[length]
    ("status", 2),        # responses: Status
    ("tag", TAG_BITS),
    ("dest", DEST_BITS),  # node id (unicast, responses) or group id (MULTICAST, REDUCE)
    ("src", SRC_BITS),    # stamped by the sending chiplet from its node id
    ("op", 2),            # REDUCE: sim.layouts.Op
    ("dtype", 3),         # REDUCE: sim.layouts.Dtype
    ("rsvd0", 3),
    ("chunk", CHUNK_BITS),  # REDUCE: chunk id
    ("addr", ADDR_BITS),
    ("rsvd1", 15),
])
assert TL_HEADER.width == SLOT_BITS

#: One beat on the accelerator port (requests in/out, responses in/out): the header fields
#: (valid on every beat of a message, sampled on the first) and 16 bytes of data.
PORT_BEAT = Fields([("data", SLOT_BITS)] + list(TL_HEADER.fields))

#: The 96-bit DL header at the bottom of the trailer slot.
DL_HEADER = Fields([
    ("seq", SEQ_BITS),        # sequence number (data flits only)
    ("data", 1),              # 1: carries TL flits, is sequenced and replayable
    ("n_tl", 6),              # valid TL flits (a prefix of the tl_per_dl positions)
    ("vc", MAX_TL_PER_DL),    # bit j: VC of TL flit j
    ("ack", SEQ_BITS),        # cumulative: every seq before this one was received
    ("nak", 1),               # please replay from ``ack``
    ("init", 1),              # bring-up flit; credit fields carry the buffer sizes
    ("init_seen", 1),         # sender has received a good flit from this side since init
    ("credit0", CREDIT_BITS),  # cumulative TL flits freed on VC 0 (init: VC 0 buffer size)
    ("credit1", CREDIT_BITS),  # same for VC 1
    ("fresh", 1),             # bring-up flit of a DL not ACTIVE since its reset or link reset
    ("gen", GEN_BITS),        # sender's drops, failures and refreshes since reset
    ("gen_seen", GEN_BITS),   # ``gen`` of the last flit it took from this side
    ("rsvd", 9 - 2 * GEN_BITS),
])
assert DL_HEADER.width == 96

DL_TRAILER = Fields(list(DL_HEADER.fields) + [("crc", 32)])
assert DL_TRAILER.width == SLOT_BITS


#: One word on the PHY side: a slot, ``first`` (first slot of a DL flit, the flit
#: delimiter a PCS carries in its block type) and ``err`` (the receive adapter made this
#: slot from a row the PCS delivered damaged; the DL fails the flit; 0 on transmit).
PHY_WORD = Fields([("data", SLOT_BITS), ("first", 1), ("err", 1)])
#: A TL flit between the transaction and data-link layers.
TL_FLIT = Fields([("data", TL_BYTES * 8), ("vc", 1)])
class LinkState(IntEnum):
    """``STATUS.state``: the data-link layer's state (docs/protocol.md, "Bring-up" and
    "Fault escalation")."""
    DOWN = 0
    INIT = 1
    ACTIVE = 2
    FAILED = 3      #: replay limit, link-lost timeout or peer reset; silent for ``retrain_holdoff``


#: Request opcodes without a completion (counted per opcode when refused: ``failed_*``).
POSTED = (Opcode.MULTICAST, Opcode.REDUCE, Opcode.RESULT)
#: Request opcodes that hold a tag until their completion (the port's completion timer).
NON_POSTED = (Opcode.WRITE, Opcode.READ, Opcode.ATOMIC_ADD)

#: Status and counters of one chiplet (all counters saturate).
STATUS = Fields([
    ("state", 2),            # LinkState: 0 down, 1 init, 2 active, 3 failed
    ("replays", 16),         # go-back-N rewinds (NAK or timeout)
    ("timeouts", 16),        # rewinds caused by the replay timer
    ("crc_err", 16),         # received DL flits failing CRC
    ("seq_err", 16),         # good-CRC data flits ahead of the expected sequence (gap)
    ("dup", 16),             # good-CRC data flits behind it (duplicates, dropped)
    ("frame_err", 16),       # DL flits cut short by a new ``first``
    ("credit_err", 8),       # credit returns out of range (ignored)
    ("bad_op", 8),           # accelerator beats with an opcode invalid on their port (dropped)
    ("overflow", 8),         # TL flits that found a full receive buffer (never, with credits)
    ("tx_flits", 32),        # data DL flits sent, first transmissions
    ("tx_replayed", 32),     # data DL flits sent again
    ("rx_flits", 32),        # data DL flits accepted in sequence
    ("replay_pos", 6),       # replay-buffer entry the latest go-back-N restarted from
    # fault escalation (docs/protocol.md, "Fault escalation")
    ("failed", 1),           # the DL entered FAILED and has not been ACTIVE since
    ("failures", 16),        # entries into FAILED (either cause)
    ("fail_replay", 16),     # ... because replay_limit rewinds made no ack progress
    ("fail_lost", 16),       # ... because no good flit came for link_timeout cycles
    ("unacked", 7),          # DL flits held unacknowledged in the replay buffer
    ("cpl_timeouts", 16),    # TIMEOUT completions made by the port's completion timer
    ("cpl_refused", 16),     # non-posted requests refused while failed (ERROR completion)
    ("late_cpl", 16),        # completions for a tag not outstanding (late): dropped
    ("failed_multicast", 16),  # posted requests refused while failed, per opcode
    ("failed_reduce", 16),
    ("failed_result", 16),
    ("failed_cpl", 16),      # responses refused while failed (switch side only)
    # peer reset (docs/protocol.md, "Peer reset and link reset")
    ("fail_peer", 16),       # entries into FAILED because the peer was reset (counted in failures)
    ("discarded", 16),       # TL flits of ours discarded by link resets (replay buffer, TL FIFOs)
    ("stale_rsp", 16),       # responses to requests delivered before a link reset: dropped
])



# -- DL framing and PHY parameters -------------------------------------------------------------

def dl_flit_slots(tl_per_dl: int) -> int:
    """Slots of one DL flit on the wire."""
    return SLOTS_PER_TL * tl_per_dl + 1


def check_tl_per_dl(tl_per_dl: int):
    if not 1 <= int(tl_per_dl) <= MAX_TL_PER_DL:
        raise ValueError(f"tl_per_dl={tl_per_dl} must be in 1..{MAX_TL_PER_DL}")


#: Most DL flits between two START rows (``start_every``) the PHY adapters accept.
MAX_START_EVERY = 4096


def check_phy_params(tl_per_dl: int, start_every: int) -> None:
    """Validate the PHY adapter parameters or raise ValueError naming the bad value."""
    if not isinstance(tl_per_dl, int) or isinstance(tl_per_dl, bool):
        raise ValueError(f"tl_per_dl={tl_per_dl!r} must be an int")
    check_tl_per_dl(tl_per_dl)
    if (not isinstance(start_every, int) or isinstance(start_every, bool)
            or not 1 <= start_every <= MAX_START_EVERY):
        raise ValueError(f"start_every={start_every!r} must be an int in 1..{MAX_START_EVERY}")



@dataclass(frozen=True)
class ChipletParams:
    """The link parameters of one chiplet (same names as the RTL block ``chiplet``).

    One object carries them from the ``Chiplet`` constructor to its data-link layers and to
    the numpy model; constructing it checks every value.

    Parameters
    ----------
    tl_per_dl : int
        TL flits (64 B) per DL flit, 1..32; a DL flit is ``4 * tl_per_dl + 1`` slots.
    replay_depth : int
        DL flits kept for replay, a power of two in 2..64.
    rx_credits : int
        Receive buffer per VC in TL flits, 1..1024 (advertised to the peer at bring-up).
    replay_timeout : int
        Cycles without ack progress before replaying, 0..65535; 0 derives it
        (:attr:`timeout`).
    close_timeout : int
        Idle cycles before a partly filled DL flit is sent as it is, 1..255.
    stamp_src : bool
        True for an accelerator endpoint (``src`` = node id); False on the switch side of a
        fabric link, where forwarded messages keep their source.
    replay_limit : int
        Go-back-N rewinds allowed without ack progress, 1..255; the next rewind due puts the
        DL in FAILED instead (docs/protocol.md, "Fault escalation").
    link_timeout : int
        Cycles without a good received flit before FAILED, 0..2**20 - 1; 0 derives it
        (:attr:`lost_after`).
    retrain_holdoff : int
        Cycles the DL stays FAILED (silent) before it retrains by itself, 0..65535; 0 derives
        it (:attr:`holdoff`).
    cpl_timeout : int
        Cycles a non-posted request may wait for its completion at the accelerator port
        before it completes with status TIMEOUT, 0..2**24 - 1; 0: no completion timer (the
        switch side of a fabric link, ``stamp_src=False``, never has one).

    Raises
    ------
    ValueError
        Naming the first bad value (not an int, or out of range; ``stamp_src`` not a bool).
    """
    tl_per_dl: int = 4
    replay_depth: int = 8
    rx_credits: int = 16
    replay_timeout: int = 0
    close_timeout: int = 8
    stamp_src: bool = True
    replay_limit: int = 16
    link_timeout: int = 0
    retrain_holdoff: int = 0
    cpl_timeout: int = 65536

    def __post_init__(self):
        for name in ("tl_per_dl", "replay_depth", "rx_credits", "replay_timeout",
                     "close_timeout", "replay_limit", "link_timeout", "retrain_holdoff",
                     "cpl_timeout"):
            value = getattr(self, name)
            if not isinstance(value, Integral) or isinstance(value, bool):
                raise ValueError(f"{name}={value!r} must be an int")
        if not isinstance(self.stamp_src, bool):
            raise ValueError(f"stamp_src={self.stamp_src!r} must be a bool")
        check_tl_per_dl(self.tl_per_dl)
        d = self.replay_depth
        if d < 2 or d > 64 or d & (d - 1):
            raise ValueError(f"replay_depth={d} must be a power of two in 2..64")
        if not 1 <= self.rx_credits <= 1024:
            raise ValueError(f"rx_credits={self.rx_credits} must be in 1..1024")
        if self.replay_timeout < 0 or self.replay_timeout >= 1 << 16:
            raise ValueError(f"replay_timeout={self.replay_timeout} must be in 0..65535")
        if not 1 <= self.close_timeout <= 255:
            raise ValueError(f"close_timeout={self.close_timeout} must be in 1..255")
        if not 1 <= self.replay_limit <= 255:
            raise ValueError(f"replay_limit={self.replay_limit} must be in 1..255")
        if not 0 <= self.link_timeout < 1 << 20:
            raise ValueError(f"link_timeout={self.link_timeout} must be in 0..{(1 << 20) - 1}")
        if not 0 <= self.retrain_holdoff < 1 << 16:
            raise ValueError(f"retrain_holdoff={self.retrain_holdoff} must be in 0..65535")
        if not 0 <= self.cpl_timeout < 1 << 24:
            raise ValueError(f"cpl_timeout={self.cpl_timeout} must be in 0..{(1 << 24) - 1}")

    @property
    def flit_slots(self) -> int:
        return dl_flit_slots(self.tl_per_dl)

    @property
    def timeout(self) -> int:
        """Replay timeout in cycles: ``replay_timeout`` or, if 0, 8 DL flit times + 64."""
        return self.replay_timeout or 8 * self.flit_slots + 64

    @property
    def lost_after(self) -> int:
        """Link-lost timeout in cycles: ``link_timeout`` or, if 0, 16 replay timeouts.

        While the link is up the peer sends a flit every ``flit_slots`` cycles (control flits
        when it has no data), so 16 replay timeouts (``16 * (8 * flit + 64)`` by default) are
        more than 128 flit times in a row without one good flit."""
        return self.link_timeout or 16 * self.timeout

    @property
    def stall_after(self) -> int:
        """Progress watchdog in cycles: ``replay_limit + 2`` replay timeouts.

        Counted while flits are unacknowledged, in every state but FAILED, from the last ack
        progress. While ACTIVE throughout, the replay limit fails the DL a replay timeout
        earlier; the watchdog catches what the replay timer cannot: a PHY that drops more
        often than once per replay timeout restarts that timer at every bring-up."""
        return (self.replay_limit + 2) * self.timeout

    @property
    def holdoff(self) -> int:
        """Cycles spent FAILED before retraining: ``retrain_holdoff`` or, if 0, one replay
        timeout."""
        return self.retrain_holdoff or self.timeout

    @property
    def tracks_completions(self) -> bool:
        """The accelerator port runs the completion timer (an endpoint with a timeout)."""
        return self.stamp_src and self.cpl_timeout > 0

    def fail_bounds(self) -> dict:
        """Detection bounds in cycles (docs/protocol.md, "Fault escalation").

        ``replay``: FAILED at most this many cycles after the last ack progress while flits
        are unacknowledged, the DL stays ACTIVE and no rewind makes progress
        (``replay_limit`` rewinds, then the next one due: each comes within one replay
        timeout of the previous). ``stall``: FAILED exactly this many cycles after the last
        ack progress (or the first send after it) while flits stay unacknowledged, whatever
        the state meanwhile (the progress watchdog, :attr:`stall_after`; counted as a
        replay-limit failure).
        ``lost``: FAILED exactly this many cycles after the last good flit received while
        ACTIVE, or after leaving FAILED (once the PHY has been up since reset), whatever
        the state meanwhile (DOWN, INIT or ACTIVE). ``retrain``: cycles from entering FAILED to
        sending bring-up flits again (hold-off, then DOWN one cycle). ``cpl``: a non-posted
        request accepted on ``i_req`` completes with TIMEOUT at most this many cycles later
        if no completion came (timer plus one scan of the 256 tags plus the error
        completion waiting behind at most one message of 17 beats on ``o_rsp`` that is not
        stalled by the accelerator).
        """
        return {"replay": (self.replay_limit + 1) * self.timeout + 2,
                "stall": self.stall_after,
                "lost": self.lost_after,
                "retrain": self.holdoff + 2,
                "cpl": (self.cpl_timeout + 256 + 2 + 17) if self.tracks_completions else None}
