"""Multicast across the tiers of a Clos in the cycle model (sim/fabric/clos.py): a one-leaf
Clos equals the single switch with multicast traffic, departure for departure; on two-tier
Clos domains every multicast flit reaches exactly its group's members, once each, with one
copy up (only when a member is on another leaf) and one copy down per other member leaf,
counted against a count computed here from the trace and the groups; bad groups and kinds
are one-line ConfigErrors."""

from collections import Counter

import numpy as np
import pytest

from fusionfabric.sim.fabric.config import ConfigError, LinkParams, SwitchParams
from fusionfabric.sim.fabric.clos import ClosFabric, clos_group_tables, run_clos_trace
from fusionfabric.sim.fabric.exact import random_trace, run_trace

from .test_model_clos import clos, splitmix_flow_hash


# -- one leaf = the single switch ------------------------------------------------------------

@pytest.mark.parametrize("n, spines, lat, credits, frame", [(6, 2, 2, 3, 7), (8, 1, 0, 0, 0),
                                                            (5, 3, 1, 0, 5)])
def test_one_leaf_clos_multicast_equals_the_single_switch(n, spines, lat, credits, frame):
    """All endpoints on one leaf, its uplinks to one-port spines unused: with 20 % multicast
    packets (groups of one member, of the source's own port, of every port), packets to
    missing endpoints and groups, REDUCE flits (dropped: no reduction units), link latency,
    credits, framing and 30 % output stalls, every departure, per-port counter, the latency
    histogram and the largest latency equal the single switch's."""
    rng = np.random.default_rng(300 + n)
    groups = {0: [0, 2, n - 1], 1: [1], 2: list(range(n)), 3: [n - 2, n - 1], 4: [3]}
    packets = random_trace(rng, n, 300, 300, max_size=4, multicast_groups=6, p_bad=0.1)
    kinds = Counter(p[4] for p in packets)
    assert kinds[1] > 40 and kinds[2] > 0 and any(p[4] == 1 and p[2] == 5 for p in packets)
    sw = SwitchParams(n_ports=n, depth=2, out_depth=2, iterations=3)
    link = LinkParams(latency=lat, credits=credits, frame_period=frame)
    ready = rng.random((1500, n)) >= 0.3
    out = []
    rows = run_trace(sw, packets, 1500, link=link, ready=ready, groups=groups, fabric_out=out)
    fab = run_clos_trace(sw, clos(1, n, spines), packets, 1500, link=link, ready=ready,
                         groups=groups)
    d = fab.departures()
    assert (d.batch == 0).all()                                   # nothing left the leaf
    got = list(zip(d.cycle.tolist(), d.out.tolist(), d.src.tolist(),
                   (d.seq & 0xFFFFF).tolist(), d.flit.tolist()))
    assert len(rows) > 700 and got == rows
    assert (d.kind == 1).sum() > 200
    single = out[0].s
    assert np.array_equal(fab.s["st"][0, :n], single["st"][0])
    assert np.array_equal(fab.s["hist"][0], single["hist"][0])
    assert fab.s["latmax"][0] == single["latmax"][0]
    assert fab.in_flight().sum() == 0


# -- two tiers: exactly the members, once each -------------------------------------------------

L, E, S = 4, 3, 2
GROUPS = {0: [0, 1, 2],            # all on leaf 0
          1: [4],                  # one member, leaf 1
          2: list(range(L * E)),   # everyone
          3: [2, 3, 11],           # leaves 0, 1, 3
          4: [7, 8],               # leaf 2 only
          5: [0, 5, 6, 9]}         # one per leaf


def _trace(rng, packets, span):
    """Unicast and multicast packets (40 %), plus an invalid group and REDUCE flits."""
    n = L * E
    out = []
    for _ in range(packets):
        cyc, src = int(rng.integers(0, span)), int(rng.integers(0, n))
        size = int(rng.integers(1, 5))
        u = rng.random()
        if u < 0.4:
            out.append((cyc, src, int(rng.integers(0, len(GROUPS))), size, 1))
        elif u < 0.43:
            out.append((cyc, src, 200, size, 1))                  # no such group: dropped
        elif u < 0.45:
            out.append((cyc, src, 0, size, 2))                    # REDUCE: dropped
        else:
            out.append((cyc, src, int(rng.integers(0, n)), size, 0))
    return out


@pytest.mark.parametrize("routing", ["deterministic", "ecmp", "adaptive"])
def test_two_tier_multicast_reaches_exactly_the_members_once(routing):
    """4 leaves x 3 endpoints, 2 spines; leaf-spine links of latency 2 with 2 credits,
    endpoint links of latency 1, 30 % endpoint stalls. Counted here from the trace and the
    groups: every flit of a multicast packet reaches each member of its group once and no
    other endpoint; at the source leaf it goes up once when a member is on another leaf
    (none otherwise), on the uplink of the routing rule (deterministic: group mod spines;
    ECMP: the flow hash of (source, group); adaptive: one uplink per packet); each spine
    copy goes down to a leaf with members other than the source leaf, one per such leaf.
    Deterministic and ECMP: each member receives a (source, group) pair's flits in order.
    Unicast flits arrive once at their destination; invalid groups and REDUCE flits are
    dropped at the source leaf and counted; nothing is left in the fabric."""
    n = L * E
    rng = np.random.default_rng(11)
    packets = _trace(rng, 700, 500)
    ready = rng.random((6000, n)) >= 0.3
    fab = run_clos_trace(SwitchParams(depth=3, out_depth=2),
                         clos(L, E, S, routing, link_latency=2, link_credits=2), packets,
                         6000, link=LinkParams(latency=1), ready=ready, groups=GROUPS)
    # the count of this test: per flit (src, seq, flit) the endpoints it must reach
    expect = Counter()
    up, down = {}, {}
    bad_group = bad_kind = 0
    seq = [0] * n
    last = {}
    for cyc, src, dest, size, kind in sorted(packets, key=lambda p: (p[1], p[0])):
        last[(src, seq[src])] = size - 1
        for f in range(size):
            key = (src, seq[src], f)
            if kind == 0:
                expect[(dest,) + key] += 1
            elif kind == 1 and dest in GROUPS:
                for m in GROUPS[dest]:
                    expect[(m,) + key] += 1
                leaves = {m // E for m in GROUPS[dest]} - {src // E}
                up[key] = 1 if leaves else 0
                down[key] = sorted(leaves)
            elif kind == 1:
                bad_group += 1
            else:
                bad_kind += 1
        seq[src] += 1
    d = fab.departures()
    sw, port = d.batch, d.out
    src, sq, fl = d.seq >> 20, d.seq & 0xFFFFF, d.flit
    at = (sw < L) & (port < E)                                    # deliveries to endpoints
    got = Counter(zip((sw[at] * E + port[at]).tolist(), src[at].tolist(), sq[at].tolist(),
                      fl[at].tolist()))
    assert got == expect and max(got.values()) == 1
    mc = d.kind == 1
    assert set(d.dest[mc & at].tolist()) == set(GROUPS)
    if routing != "adaptive":          # one path per (source, group): in order at a member
        order = {}
        for e, s_, g, q, f in zip((sw[mc & at] * E + port[mc & at]).tolist(),
                                  src[mc & at].tolist(), d.dest[mc & at].tolist(),
                                  sq[mc & at].tolist(), fl[mc & at].tolist()):
            order.setdefault((e, s_, g), []).append((q, f))
        assert all(v == sorted(v) for v in order.values())
    # one copy up at the source leaf, on the routing's uplink
    upl = mc & (sw < L) & (port >= E)
    ups = Counter(zip(src[upl].tolist(), sq[upl].tolist(), fl[upl].tolist()))
    assert {k: v for k, v in ups.items()} == {k: 1 for k, v in up.items() if v}
    assert (sw[upl] == src[upl] // E).all()                       # only the source leaf
    spine_of = {}
    for s_, q, f, o, g in zip(src[upl].tolist(), sq[upl].tolist(), fl[upl].tolist(),
                              port[upl].tolist(), d.dest[upl].tolist()):
        k = o - E
        if routing == "deterministic":
            assert k == g % S
        elif routing == "ecmp":
            assert k == splitmix_flow_hash(s_, g) % S
        spine_of.setdefault((s_, q), set()).add(k)
    assert all(len(v) == 1 for v in spine_of.values())            # one uplink per packet
    # the spine: one copy down per other member leaf, from the spine it went up to
    spl = mc & (sw >= L)
    downs = {}
    for s_, q, f, leaf, spine in zip(src[spl].tolist(), sq[spl].tolist(), fl[spl].tolist(),
                                     port[spl].tolist(), (sw[spl] - L).tolist()):
        assert spine_of[(s_, q)] == {spine}
        downs.setdefault((s_, q, f), []).append(leaf)
    assert {k: sorted(v) for k, v in downs.items()} == {k: v for k, v in down.items() if v}
    assert all(len(v) == len(set(v)) for v in downs.values())
    st = fab.s["st"]                                              # (switch, port, column)
    assert st[:L, :E, 5].sum() == bad_group and st[:L, :E, 6].sum() == bad_kind
    assert st[:, :, 5].sum() == bad_group and st[:, :, 6].sum() == bad_kind
    assert fab.in_flight().sum() == 0 and fab.backlog().sum() == 0 and fab.credits_ok()
    view = fab.endpoint_view().s["st"][0]                         # every cycle is sampled
    assert view[:, 13].sum() == sum(v for (m, s_, q, f), v in expect.items()
                                    if last[(s_, q)] == f)      # packets delivered


def test_copies_leave_in_port_order_lowest_first():
    """A lone multicast flit from endpoint 1 (leaf 0) to group 5 (endpoints 0, 5, 6, 9:
    one per leaf): leaf 0 writes its local copy (port 0) before the uplink copy; the spine
    writes the copies to leaves 1, 2, 3 in that order, one per cycle."""
    fab = run_clos_trace(SwitchParams(depth=4, out_depth=4), clos(L, E, S), [(0, 1, 5, 1, 1)],
                         200, groups=GROUPS)
    d = fab.departures()
    rows = sorted(zip(d.cycle.tolist(), d.batch.tolist(), d.out.tolist()))
    leaf0 = [(t, o) for t, b, o in rows if b == 0]
    assert [o for _, o in leaf0] == [0, E + 5 % S] and leaf0[0][0] < leaf0[1][0]
    spine = [(t, o) for t, b, o in rows if b == L + 5 % S]
    assert [o for _, o in spine] == [1, 2, 3]
    assert [t for t, _ in spine] == [spine[0][0] + k for k in range(3)]
    ends = sorted((b * E + o) for t, b, o in rows if b < L and o < E)
    assert ends == GROUPS[5]


# -- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("groups, fragment", [
    ({0: list(range(13))}, "group 0 has 13 members, more than the Clos's 12 endpoints"),
    ({1: [0, 12]}, "group 1 member 12 is not an endpoint 0..11"),
    ({2: [3, 3]}, "group 2 lists endpoint 3 twice"),
    ({16: [0]}, "multicast group 16 is outside 0..15 (switch.n_groups=16)"),
    ({-1: [0]}, "multicast group -1 is outside 0..15"),
    ({0: {"members": [0, 1], "mode": 0, "root": 0}}, "reduction groups"),
])
def test_bad_groups_are_one_line_config_errors(groups, fragment):
    with pytest.raises(ConfigError) as exc:
        ClosFabric(SwitchParams(), None, clos(L, E, S), groups=groups)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(ConfigError):
        clos_group_tables(groups, 16, L, E, S, E + S)


@pytest.mark.parametrize("kind, dest, fragment", [
    (5, 0, "packet kind 5 is not 0 (unicast), 1 (multicast), 2 or 3"),
    (1, 70000, "multicast to group 70000: a Clos flit's group field is 0..65535"),
])
def test_bad_packet_kinds_are_one_line_config_errors(kind, dest, fragment):
    with pytest.raises(ConfigError) as exc:
        run_clos_trace(SwitchParams(), clos(L, E, S), [(0, 0, dest, 1, kind)], 10,
                       groups=GROUPS)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_group_tables_per_switch():
    """The tables derived from the global groups: a leaf holds its local members and, when
    a member is elsewhere, every uplink; a spine holds the member leaves."""
    G, N = 16, E + S
    m, v = clos_group_tables(GROUPS, G, L, E, S, N)
    assert v[:6].all() and not v[6:].any()
    row = lambda s, g: np.flatnonzero(m[s * G + g]).tolist()
    assert row(0, 0) == [0, 1, 2] and row(1, 0) == [3, 4]          # leaf 1: up only
    assert row(2, 4) == [1, 2] and row(0, 4) == [3, 4]
    assert row(L, 3) == [0, 1, 3] and row(L + 1, 3) == [0, 1, 3]
    assert row(L, 1) == [1] and row(3, 1) == [3, 4]


def test_adaptive_multicast_goes_up_the_least_occupied_uplink():
    """Leaf 0 (4 endpoints, 2 uplinks): endpoint 0 starts 100 flits to endpoint 4, which
    never accepts, so its uplink u0 (the ECMP uplink of (0, 4): both are empty) fills and
    stays locked. In cycle 50 endpoint 1 multicasts 3 flits to a group on leaf 1 whose id
    is u0 mod 2 and whose flow hash from 1 is u0 too: deterministic and ECMP routing send it
    up u0 behind the stuck packet, adaptive routing up the other, empty uplink, all three
    flits, and it reaches both members."""
    L2, E2, S2 = 2, 4, 2
    u0 = splitmix_flow_hash(0, 4) % S2
    g = next(g for g in range(16) if g % S2 == u0 and splitmix_flow_hash(1, g) % S2 == u0)
    groups = {g: [5, 6]}
    ready = np.ones((400, L2 * E2), bool)
    ready[:, 4] = False
    trace = [(0, 0, 4, 100, 0), (50, 1, g, 3, 1)]
    for routing, uplink in (("adaptive", 1 - u0), ("deterministic", u0), ("ecmp", u0)):
        fab = run_clos_trace(SwitchParams(depth=8, out_depth=4), clos(L2, E2, S2, routing),
                             trace, 400, ready=ready, groups=groups)
        d = fab.departures()
        mc = d.kind == 1
        up = mc & (d.batch == 0) & (d.out >= E2)
        if routing == "adaptive":
            assert d.out[up].tolist() == [E2 + uplink] * 3
            ends = sorted(zip((d.batch[mc & (d.batch < L2) & (d.out < E2)] * E2
                               + d.out[mc & (d.batch < L2) & (d.out < E2)]).tolist(),
                              d.flit[mc & (d.batch < L2) & (d.out < E2)].tolist()))
            assert ends == [(5, 0), (5, 1), (5, 2), (6, 0), (6, 1), (6, 2)]
        else:                          # behind the locked uplink: it never leaves leaf 0
            assert not up.any()
            assert fab.s["q_cnt"][0, 1, E2 + uplink] == 3
