"""Register-level model of per-destination admission at an accelerator port
(``fusionfabric.rtl.fabric.admission.DestAdmission``; docs/fabric.md, "Admission per
destination")."""

from __future__ import annotations

from fusionfabric.formats.chiplet import NON_POSTED

from .chiplet import data_slots

__all__ = ["DestAdmissionModel", "MAX_MSG_FLITS", "switch_flits"]

#: Switch flits of a 256-byte message: its header flit and 16 data flits.
MAX_MSG_FLITS = 1 + 16

def switch_flits(opcode: int, length: int) -> int:
    """Flits of a (non-REDUCE) message at the switch: a header flit, then its data slots."""
    return 1 + data_slots(opcode, length)


def _left_after(left: int, beat: dict) -> int:
    """Beats of a message left after the one taken: ``left`` is 0 on its first beat, whose
    fields give the message's ``max(data slots, 1)`` beats."""
    if left:
        return left - 1
    return max(data_slots(beat["opcode"], beat["length"]) - 1, 0)


class DestAdmissionModel:
    """Per destination, the switch flits of requests sent and not yet completed.

    Call :meth:`req_ready` and :meth:`dest_ready` for a cycle's outputs, then :meth:`step`
    with that cycle's handshakes. A completion's first beat taken in cycle t frees its
    request's flits from cycle t+2; a request taken in t counts from t+1.
    """

    def __init__(self, n_dests: int, credits: int):
        self.n, self.credits = n_dests, credits
        self.count = [0] * n_dests
        self.table: dict[int, tuple[int, int]] = {}     # tag -> (dest, flits)
        self.req_left = 0           # beats of the current request after the one offered
        self.cpl_left = 0
        self._free = None           # (dest, flits) read in the previous cycle
        self.bad_dest = 0

    def _gated(self, opcode, dest) -> bool:
        return self.req_left == 0 and opcode in NON_POSTED and dest < self.n

    def req_ready(self, opcode: int, length: int, dest: int, out_ready: bool) -> bool:
        """``i_req.ready`` with a beat of these fields offered."""
        if not out_ready:
            return False
        if not self._gated(opcode, dest):
            return True
        return self.count[dest] + switch_flits(opcode, length) <= self.credits

    def dest_ready(self) -> list[bool]:
        return [c + MAX_MSG_FLITS <= self.credits for c in self.count]

    def step(self, req=None, cpl=None):
        """End of a cycle. ``req``/``cpl``: the fields (``opcode``, ``length``, ``dest``,
        ``tag``) of the beat taken on ``i_req``/``o_rsp`` in it, or None."""
        free, self._free = self._free, None
        if cpl is not None:
            if self.cpl_left == 0:
                self._free = self.table.get(cpl["tag"], (0, 0))
            self.cpl_left = _left_after(self.cpl_left, cpl)
        if free is not None:
            d, f = free
            if d < self.n:
                self.count[d] -= f
                assert self.count[d] >= 0, f"count of destination {d} below 0"
        if req is not None:
            op, dest = req["opcode"], req["dest"]
            if self.req_left == 0:
                if op in NON_POSTED:
                    f = switch_flits(op, req["length"])
                    if dest < self.n:
                        self.table[req["tag"]] = (dest, f)
                        self.count[dest] += f
                    else:
                        self.table[req["tag"]] = (dest, 0)
                        self.bad_dest += 1
            self.req_left = _left_after(self.req_left, req)
