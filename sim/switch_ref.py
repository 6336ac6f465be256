"""Transaction-level references for the switch testbenches (pure Python/numpy).

- :class:`ISLIPReference`: iSLIP (McKeown, IEEE/ACM ToN 7(2) 1999) with integer grant
  and accept pointers, written from the paper's rules, independent of the RTL's
  thermometer-mask encoding; used to check the allocator cycle by cycle.
- :func:`route`: the set of output ports a flit goes to (docs/switch.md "Routing"), or
  the drop cause; the scoreboards expect one copy per target.

This is not the cycle model of the fabric (that is ``sim/fabric*``).
"""

from __future__ import annotations

import math
from typing import Sequence

from fusionfabric.formats.switch import Kind

__all__ = ["ISLIPReference", "route", "max_iterations"]


def max_iterations(n_ports: int) -> int:
    return max(1, math.ceil(math.log2(n_ports)))


class ISLIPReference:
    """iSLIP with ``iterations`` rounds on an ``n_ports`` square switch.

    ``step(req)`` takes ``req[i][o]`` (truthy: input i requests output o), returns
    ``match[i]`` (the output matched to input i, or -1) and updates the pointers: only
    round-1 matches move them, to one past the partner.
    """

    def __init__(self, n_ports: int, iterations: int = 1):
        if n_ports < 2:
            raise ValueError(f"n_ports={n_ports} must be >= 2")
        if not 1 <= iterations <= max_iterations(n_ports):
            raise ValueError(f"iterations={iterations} out of 1..{max_iterations(n_ports)}")
        self.n = n_ports
        self.iterations = iterations
        self.grant_ptr = [0] * n_ports
        self.accept_ptr = [0] * n_ports

    def _rr(self, candidates: Sequence[int], ptr: int) -> int:
        for k in range(self.n):
            c = (ptr + k) % self.n
            if c in candidates:
                return c
        return -1

    def step(self, req) -> list[int]:
        n = self.n
        match_in = [-1] * n
        match_out = [-1] * n
        for rnd in range(self.iterations):
            grants: dict[int, list[int]] = {}
            for o in range(n):
                if match_out[o] >= 0:
                    continue
                reqs = [i for i in range(n) if match_in[i] < 0 and req[i][o]]
                if reqs:
                    i = self._rr(reqs, self.grant_ptr[o])
                    grants.setdefault(i, []).append(o)
            new = []
            for i, outs in grants.items():
                o = self._rr(outs, self.accept_ptr[i])
                new.append((i, o))
            for i, o in new:
                match_in[i], match_out[o] = o, i
                if rnd == 0:
                    self.accept_ptr[i] = (o + 1) % n
                    self.grant_ptr[o] = (i + 1) % n
        return match_in


def route(kind: int, dest: int, n_ports: int, groups: dict[int, dict],
          reduce: bool = False) -> tuple[list[int], str]:
    """Output ports a flit goes to and its drop cause (``""`` if not dropped).

    ``groups`` maps group id to an entry dict with ``members`` (bitmap) and ``valid``;
    a missing id is an invalid entry. REDUCE flits go to a reduction unit when
    ``reduce`` (no output port: ``([], "")``); otherwise, and RESULT flits from a port
    always, they are dropped.
    """
    if reduce and kind == Kind.REDUCE:
        return [], ""
    if kind == Kind.UNICAST:
        if dest >= n_ports:
            return [], "drop_dest"
        return [dest], ""
    if kind == Kind.MULTICAST:
        e = groups.get(dest)
        if not e or not e.get("valid") or not e.get("members"):
            return [], "drop_group"
        return [p for p in range(n_ports) if (e["members"] >> p) & 1], ""
    return [], "drop_kind"
