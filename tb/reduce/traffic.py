"""Reduction traffic and expectations, shared by the Amaranth-sim and cocotb tests.

Pure Python/numpy (no cocotb): builds group-table writes, contribution flits for a set of
(group, chunk) reductions in a random arrival order (chunks interleaved, members shuffled),
optional duplicate and non-member flits, and the expected result of every chunk from
:mod:`fusionfabric.sim.reduce`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fusionfabric.sim import reduce as R
from fusionfabric.formats.switch import GROUP_BITS, Dtype, Kind, Mode, Op, group_entry, switch_flit

__all__ = ["Group", "Traffic", "make_traffic", "config_word", "result_fields"]


@dataclass
class Group:
    gid: int
    members: list[int]
    op: Op
    dtype: Dtype
    native: bool = False
    mode: Mode = Mode.ALLREDUCE
    root: int = 0

    def entry(self, n_ports: int) -> int:
        bitmap = sum(1 << p for p in self.members)
        return group_entry(n_ports).pack(members=bitmap, op=int(self.op),
                                         dtype=int(self.dtype), mode=int(self.mode),
                                         root=self.root, native=int(self.native), valid=1)


def config_word(n_ports: int, group: Group) -> int:
    """One ``i_config`` beat ``{group, entry}``."""
    return group.gid | (group.entry(n_ports) << GROUP_BITS)


def result_fields(n_ports: int, data_width: int, word: int) -> dict:
    """Split an ``o_result`` payload into flit fields + members/mode/root."""
    f = switch_flit(data_width)
    flit = f.unpack(word & ((1 << f.width) - 1))
    rest = word >> f.width
    flit["members"] = rest & ((1 << n_ports) - 1)
    flit["mode"] = (rest >> n_ports) & 1
    flit["root"] = (rest >> (n_ports + 1)) & 0xFF
    return flit


@dataclass
class Traffic:
    configs: list[int]
    flits: list[int]                       # i_contrib words, in send order
    expected: dict                         # (group, chunk) -> (data, members, mode, root)
    n_duplicate: int = 0
    n_nonmember: int = 0
    n_contributions: int = 0
    groups: list[Group] = field(default_factory=list)


def make_traffic(rng: np.random.Generator, n_ports: int, data_width: int,
                 groups: list[Group], chunks_per_group: int, *, window: int = 4,
                 special: float = 0.1, duplicates: int = 0, nonmembers: int = 0,
                 chunk_base: int = 0) -> Traffic:
    """Contributions for ``chunks_per_group`` chunks of every group.

    Arrival order: chunks are taken in a random order; up to ``window`` chunks are "live"
    at once and their members' flits are interleaved randomly (each member's flits keep no
    order), so chunks complete out of order. ``duplicates`` extra flits repeat a member's
    contribution to a chunk while it is still open (the duplicate is placed after the
    original and before that chunk's last contribution); ``nonmembers`` flits come from a
    port outside the group.
    """
    fl = switch_flit(data_width)
    jobs = []
    expected = {}
    for g in groups:
        for c in range(chunks_per_group):
            chunk = chunk_base + c
            ne = R.elements_per_flit(data_width, g.dtype)
            contrib = R.random_bits(rng, g.dtype, (len(g.members), ne), special)
            res = R.reduce_bits(contrib, g.dtype, g.op, g.native)
            expected[(g.gid, chunk)] = (R.pack_flit(res, g.dtype), sum(1 << p for p in
                                        g.members), int(g.mode), g.root)
            words = [fl.pack(data=R.pack_flit(contrib[i], g.dtype), first=1, last=1,
                             kind=int(Kind.REDUCE), dest=g.gid, src=p, chunk=chunk)
                     for i, p in enumerate(g.members)]
            jobs.append((g, chunk, words))
    order = rng.permutation(len(jobs))
    pending = [list(jobs[i][2]) for i in order]
    for p in pending:
        rng.shuffle(p)
    flits = []
    live: list[list[int]] = []
    while pending or live:
        while pending and len(live) < window:
            live.append(pending.pop(0))
        i = int(rng.integers(len(live)))
        flits.append(live[i].pop(0))
        if not live[i]:
            live.pop(i)
    n_contrib = len(flits)
    # duplicates: copy a flit to a later position before its chunk's last contribution
    dup_done = 0
    for _ in range(duplicates * 20):
        if dup_done == duplicates:
            break
        i = int(rng.integers(len(flits)))
        w = fl.unpack(flits[i])
        key = (w["dest"], w["chunk"])
        later = [j for j in range(i + 1, len(flits))
                 if (fl.unpack(flits[j])["dest"], fl.unpack(flits[j])["chunk"]) == key]
        if not later:
            continue
        pos = int(rng.integers(i + 1, later[-1] + 1))
        bad = dict(w)
        bad["data"] = w["data"] ^ 1          # different data: must never be summed
        flits.insert(pos, fl.pack(bad))
        dup_done += 1
    for _ in range(nonmembers):
        g = groups[int(rng.integers(len(groups)))]
        outside = [p for p in range(n_ports) if p not in g.members]
        if not outside:
            continue
        pos = int(rng.integers(len(flits) + 1))
        flits.insert(pos, fl.pack(data=1, first=1, last=1, kind=int(Kind.REDUCE), dest=g.gid,
                                  src=int(rng.choice(outside)), chunk=chunk_base))
    configs = [config_word(n_ports, g) for g in groups]
    t = Traffic(configs, flits, expected, dup_done, 0, n_contrib, list(groups))
    t.n_nonmember = sum(1 for w in flits
                        if fl.unpack(w)["src"] not in
                        next(g.members for g in groups if g.gid == fl.unpack(w)["dest"]))
    return t


def random_groups(rng: np.random.Generator, n_ports: int, sizes, dtypes, ops,
                  native: bool | None = None) -> list[Group]:
    """One group per (size, dtype, op) triple, random members, random mode/root."""
    groups = []
    for gid, (size, dtype, op) in enumerate(zip(sizes, dtypes, ops)):
        members = sorted(int(p) for p in rng.choice(n_ports, size, replace=False))
        nat = bool(rng.integers(2)) if native is None else native
        mode = Mode(int(rng.integers(2)))
        groups.append(Group(gid, members, Op(op), Dtype(dtype),
                            nat and Dtype(dtype) in (Dtype.FP16, Dtype.BF16), mode,
                            int(rng.choice(members))))
    return groups
