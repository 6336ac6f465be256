"""The fabric's flit and flip accounting (tb/fabric/hits.py).

Unit tests: :class:`DirectionAccount` on a synthetic link whose outcome is known by
construction: DL flits built with ``sim.chiplet.dl_frame``, rows scheduled by hand
(START, chained flits, IDLE, marker rows), flips placed by hand, and a receiver written
here from the PHY framing rules (docs/protocol.md, "PHY mapping and the PCS"): constant
latency, the descrambler's copies 39 and 58 bits on in stream order, a chain ended by an
invalid block, a START row that a flip spoils, a realignment that drops rows; CRC errors
from ``sim.chiplet.dl_parse`` on the received bytes (and the ``err`` flag).

cocotb (Icarus, 2 endpoints, soak: about a minute): a workload at BER 1e-4 with the
monitor, checking the identities the measurement established (docs/demo.md, "Bit flips and
CRC errors"): with bit errors only,

* every DL flit received different from the flit sent (or with ``err``) failed CRC, and
  every CRC error is on such a flit: ``crc_err == flits_hit``, 0 undetected;
* the flits never received whole are cut, not CRC errors (a damaged START row or chained
  first slot, or a realignment after a damaged marker row), each with its cause;
* every flip is placed: ``flips == sum(flips_by_place) == sum(flips_by_effect)``, equal to
  the injectors' ``o_flips`` and to the injectors' model (sim/faults.py) cycle by cycle.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fusionfabric.sim.chiplet import DLHeader, dl_frame, dl_parse, slots_to_flit
from fusionfabric.tb.fabric.hits import DirectionAccount, totals

TL = 4
S = 4 * TL + 1
L = 11            # the synthetic link's latency (cycles, first slot sent -> received)
SEED = 20261206


def _flits(n, seed=SEED):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        tls = [(int(rng.integers(2)), bytes(rng.integers(0, 256, 64, dtype=np.uint8)))
               for _ in range(int(rng.integers(1, TL + 1)))]
        raw = dl_frame(tls, DLHeader(seq=i, ack=i), TL)
        out.append([int.from_bytes(raw[16 * k:16 * k + 16], "little") for k in range(S)])
    return out


class Schedule:
    """Rows of the sending adapter, one per cycle from cycle 1."""

    def __init__(self):
        self.rows: list[tuple] = []

    @property
    def c(self):
        """The cycle of the next row."""
        return len(self.rows) + 1

    def add(self, *row, times=1):
        for _ in range(times):
            self.rows.append(row)
        return self.c - 1

    def flit(self, f, am_after=None):
        """Flit ``f``'s 17 slot rows (a marker row after slot ``am_after``)."""
        for k in range(S):
            self.add("slot", f, k)
            if am_after == k:
                self.add("am")


def _receive(sched, flits, flips, drops=()):
    """The receiving DL's words: ``{cycle: (data, first, err)}``, and the cycles the link
    is down. ``flips``: ``{row cycle: (lane, bit)}`` (bit 0..65 of the lane's block;
    0-1 the sync header). ``drops``: ``[(first cycle down, cycles)]`` at the receiver."""
    rows = sched.rows
    # data errors per row after the descrambler; damaged rows (invalid blocks)
    err_bits: dict[int, int] = {}
    damaged: set[int] = set()
    order = [c for c in range(1, len(rows) + 1) if rows[c - 1][0] != "am"]
    nxt = {a: b for a, b in zip(order, order[1:])}
    for rc, (lane, bit) in flips.items():
        kind = rows[rc - 1][0]
        if kind == "am":
            continue                       # markers are not descrambled
        if bit < 2 or kind != "slot":
            damaged.add(rc)                # bad sync header, or a control block spoiled
            if bit < 2:
                continue
        p = 64 * lane + bit - 2
        for q in (p, p + 39, p + 58):
            tgt, q2 = (rc, q) if q < 128 else (nxt.get(rc), q - 128)
            if tgt is not None:
                err_bits[tgt] = err_bits.get(tgt, 0) ^ (1 << q2)
    down = set()
    for d, n in drops:
        down.update(range(d, d + n))
    words: dict[int, tuple] = {}
    state = "hunt"         # hunt | armed | flit
    k = 0
    for rc in order:
        t = rc + L         # a row reaches the DL L cycles after the adapter made it
        if t in down:
            state = "hunt"
            continue
        kind = rows[rc - 1][0]
        is_start = kind == "start" and rc not in damaged
        clean_data = kind == "slot" and rc not in damaged
        if kind == "slot":
            data = flits[rows[rc - 1][1]][rows[rc - 1][2]] ^ err_bits.get(rc, 0)
        else:
            data = 0
        if state == "flit" and k == S:      # after a flit's last slot: chained or not
            state = "flit" if clean_data else "hunt"
            k = 0
            if clean_data:
                words[t] = (data, True, False)
                k = 1
                continue
        if is_start:
            state, k = "armed", 0
            continue
        if state == "armed" or (state == "flit" and k < S):
            if kind == "idle" and state == "armed":
                state = "hunt"
                continue
            words[t] = (data, state == "armed", not clean_data)
            state, k = "flit", (1 if state == "armed" else k + 1)
        elif clean_data:
            words[t] = (data, False, False)     # outside a flit: the DL ignores it
    return words, down


def _account(sched, flits, flips, drops=(), crc_drop=(), crc_extra=()):
    """Feed the schedule, the flips and the receiver into a :class:`DirectionAccount`;
    CRC errors from dl_parse on the received bytes (and err) two cycles after a flit's
    last slot, minus the flits of ``crc_drop``, plus those of ``crc_extra`` (indices of
    received flits)."""
    a = DirectionAccount("test", S)
    words, down = _receive(sched, flits, flips, drops)
    end = len(sched.rows) + L + 40
    cur, received, crc = None, [], set()
    for c in range(1, end + 1):
        row = sched.rows[c - 1] if c <= len(sched.rows) else ("idle",)
        kind = row[0]
        if kind == "am":
            a.tx(c, False, False, False)
        elif kind == "idle":
            a.tx(c, True, False, False)
        elif kind == "start":
            a.tx(c, True, True, False)
        else:
            a.tx(c, True, True, True, flits[row[1]][row[2]], row[2] == 0)
        if c - 1 in flips:
            lane, bit = flips[c - 1]
            prev = sched.rows[c - 2][0]
            sync = 2 if prev == "slot" else 1
            a.flip(c, lane, 1 << bit, block=sync)
        up = c not in down
        w = words.get(c)
        a.rx(c, w is not None and up, up, *(w or (0, False, False)))
        # the DL's framing, to place the CRC errors
        if not up:
            cur = None
        elif w is not None:
            if w[1]:
                cur = [w]
            elif cur is not None:
                cur.append(w)
            if cur is not None and len(cur) == S:
                received.append(c)
                ok, _, _ = dl_parse(slots_to_flit([x[0] for x in cur]), TL)
                j = len(received) - 1
                if ((not ok or any(x[2] for x in cur)) and j not in crc_drop) \
                        or j in crc_extra:
                    crc.add(c + 2)
                cur = None
        if c in crc:
            a.crc_error(c)
    return a.result()


def _scenario():
    """Thirteen flits: 5 hit (one only by a descrambler copy, one only by err), 4 cut by
    damaged rows (a chained first slot's sync header, a START row), 2 cut by a
    realignment, 2 intact; 9 flips."""
    fl = _flits(13)
    s = Schedule()
    flips: dict[int, tuple] = {}
    s.add("idle", times=3)
    s.add("start")
    start0 = s.c
    s.flit(0)
    flips[start0 + 5] = (0, 12)                 # F0: one payload flip
    c1 = s.c
    s.flit(1)
    flips[c1 + 3] = (0, 20)                     # F1: two flips
    flips[c1 + 9] = (1, 3)                      # (lane 1 bit 1: copies stay in the row)
    c2 = s.c
    s.flit(2, am_after=S - 1)                   # a marker row between F2 and F3
    flips[c2 + S - 1] = (1, 40)                 # F2's last slot; its copy hits F3 slot 0
    s.flit(3)
    idle = s.add("idle", times=2)
    flips[idle] = (0, 30)                       # an IDLE row: nothing
    s.add("start")
    s.flit(4)                                   # intact
    c5 = s.c
    s.flit(5)
    flips[c5] = (1, 1)                          # chained F5's first slot: invalid block
    s.flit(6)                                   # ... F5, F6 cut (no START until F7)
    s.add("idle")
    st = s.add("start")
    flips[st] = (0, 5)                          # a spoiled START row: F7, F8 cut
    s.flit(7)
    s.flit(8)
    s.add("idle")
    s.add("start")
    c9 = s.c
    s.flit(9, am_after=7)                       # a marker row inside F9, flipped
    flips[c9 + 8] = (1, 20)
    s.flit(10)
    drops = [(c9 + 8 + L + 2, 20)]              # the receiver realigns: F9, F10 cut
    s.add("idle", times=30)
    s.add("start")
    s.flit(11)                                  # intact
    c12 = s.c
    s.flit(12)
    flips[c12 + 4] = (0, 0)                     # F12 slot 4: sync header (err only)
    s.add("idle", times=20)
    return s, fl, flips, drops


def test_accounting_synthetic():
    """Every count of the accounting against the hand-built link (seed 20261206)."""
    s, fl, flips, drops = _scenario()
    r = _account(s, fl, flips, drops)
    msg = f"seed {SEED}: {r}"
    assert r["latency"] == L and r["latencies"] == [L], msg
    assert r["tx_flits"] == 13 and r["flits_in_flight"] == 0, msg
    assert (r["flits_intact"], r["flits_hit"], r["flits_cut"]) == (2, 5, 6), msg
    assert r["flits_hit_by_flip"] == 5 and r["flits_hit_err_only"] == 1, msg
    assert (r["flits_cut_chain"], r["flits_cut_relock"], r["flits_cut_unexplained"]) \
        == (4, 2, 0), msg
    assert r["crc_err"] == r["crc_err_on_hit"] == 5 and r["undetected"] == 0, msg
    assert r["crc_err_on_intact"] == r["crc_err_unattributed"] == 0, msg
    assert r["flips"] == 9 and r["flips_sync_header"] == 2, msg
    assert r["flips_by_place"] == {"flit": 6, "start": 1, "idle": 1, "am": 1,
                                   "outside": 0, "unknown": 0}, msg
    assert r["flips_by_effect"] == {"flit_hit": 5, "flit_cut": 1, "idle": 1,
                                    "start_next_cut": 1, "am_realign": 1}, msg
    assert r["flips_spilling_into_next_flit"] == 1 and r["flits_damaged_twice"] == 1, msg
    assert r["hit_flits_by_flips"] == {"1": 4, "2": 1}, msg
    assert r["link_drops"] == 1 and r["rx_partial"] == 1 and r["sync_mismatch"] == 0, msg
    assert sum(r["flips_by_place"].values()) == sum(r["flips_by_effect"].values()) == 9


def test_accounting_reports_undetected_and_false_crc():
    """A hit flit without its CRC error is counted undetected; a CRC error on an intact
    flit is counted apart (seed 20261206)."""
    s, fl, flips, drops = _scenario()
    r = _account(s, fl, flips, drops, crc_drop={0}, crc_extra={4})
    msg = f"seed {SEED}: {r}"
    assert r["undetected"] == 1 and r["crc_err_on_hit"] == 4, msg
    assert r["crc_err_on_intact"] == 1 and r["crc_err"] == 5, msg


def test_accounting_latency_change():
    """After a realignment the latency may change: the next identical flit sets it."""
    fl = _flits(4)
    a = DirectionAccount("lat", S)
    c = 1
    sent = []
    for f in range(4):
        a.tx(c, True, True, False)                # START
        c += 1
        sent.append(c)
        for k in range(S):
            a.tx(c, True, True, True, fl[f][k], k == 0)
            c += 1
        for _ in range(30):
            a.tx(c, True, False, False)
            c += 1
    lat = {0: 9, 1: 9, 2: 14, 3: 14}
    for f in range(4):
        for k in range(S):
            a.rx(sent[f] + lat[f] + k, True, True, fl[f][k], k == 0, False)
    a.rx(c + 20, False, True)
    r = a.result()
    assert r["latencies"] == [9, 14] and r["flits_intact"] == 4, r
    assert totals([r])["flits_intact"] == 4


# -- the RTL fabric -----------------------------------------------------------------------
def _fabric_run(ber, seed, workload, wparams):
    from fusionfabric.tb.common import runner
    result = runner.run("fabric", "fusionfabric.tb.fabric.test_fabric", {"n_endpoints": 2},
                        sim="icarus", seed=seed, testcase="test_workload",
                        test_args={"workload": workload, "seed": seed, "params": wparams,
                                   "faults": {"ber": ber, "slip_lane": -1},
                                   "count_hits": 1, "stall_cycles": 20_000},
                        vpi="top", name=f"fabric-hits-{ber:g}-{seed}")
    assert result.tests and not result.failed, f"seed {seed}"
    return json.loads((result.test_dir / "fabric_results.json").read_text())


@pytest.mark.cocotb
@pytest.mark.soak
def test_fabric_hits_icarus():
    """moe-alltoall (16 tokens of 64 bf16) on 2 endpoints at BER 1e-4, seed 1: the
    identities of the module doc, per direction and in total."""
    seed = 1
    res = _fabric_run(1e-4, seed, "moe-alltoall", {"tokens_per_endpoint": 16, "d_model": 64})
    h = res["hits"]
    t = h["total"]
    msg = f"seed {seed}: {t}"
    assert res["bit_exact"], msg
    assert t["flips"] == res["flips"] > 50 and not h["o_flips_mismatch"], msg
    assert h["model"]["agree"] == h["model"]["lanes"] == 8, f"seed {seed}: {h['model']}"
    for d in h["directions"]:
        dm = f"seed {seed}, {d['direction']}: {d}"
        assert sum(d["flips_by_place"].values()) == d["flips"], dm
        assert sum(d["flips_by_effect"].values()) == d["flips"], dm
        assert d["flips_by_place"]["unknown"] == 0 and d["sync_mismatch"] == 0, dm
        assert d["undetected"] == 0, dm
        # every CRC error is on a hit flit, every hit flit is a CRC error (flits still in
        # flight at the end on neither side)
        assert d["crc_err"] - d["crc_err_in_flight"] - d["crc_err_before_window"] \
            == d["crc_err_on_hit"] == d["flits_hit"], dm
        assert d["crc_err_on_intact"] == d["crc_err_on_unmatched"] == 0, dm
        assert d["crc_err_unattributed"] == d["rx_unmatched"] == 0, dm
        assert d["flits_hit"] == d["flits_hit_by_flip"] + d["flits_hit_in_relock"], dm
        assert d["flits_cut_unexplained"] == 0 and d["flits_hit_unexplained"] == 0, dm
        assert d["flits_damaged_not_hit"] == 0, dm
    assert sum(x["crc_errors"] for x in res["endpoints"]) == t["crc_err"], msg
