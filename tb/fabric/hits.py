"""Flit accounting on the fabric's links: which DL flits the lane bit errors hit, which of
them failed CRC, and where every flipped bit landed (docs/demo.md, "Bit flips and CRC
errors").

Per link direction (``up{e}``: endpoint chiplet → switch-side chiplet, ``down{e}``: back)
a cocotb monitor (:class:`HitMonitor`, Icarus only: it reads signals below the top level)
samples every cycle from reset on (it only reads: a run is the same with it as without)

* the DL flits the sending chiplet hands its PHY adapter (``o_phy``: the words taken,
  ``first`` marks a flit's first slot), and the adapter's row of that cycle (a slot, a
  START row, an IDLE row when nothing is offered, a marker row when the PCS is not
  ready);
* the words the receiving chiplet's DL gets from its PHY adapter (``i_phy``: data,
  ``first``, ``err``) while its link is up, and its ``crc_err`` counter;
* each lane fault injector's ``flip`` and, in a flip cycle, its clean block and error mask.

:class:`DirectionAccount` (plain Python, unit-tested on its own) turns the samples into
the accounting. With random bit errors only the lane path has a fixed latency: a received
flit whose first slot arrives at cycle ``t`` is the sent flit whose first slot was taken at
``t - L``, with ``L`` taken from the first received flit identical to a sent one (and taken
again from the next identical one when no sent flit starts at ``t - L``: a realignment).
Then each sent flit is *intact* (received identical, no ``err``), *hit* (received
different or with ``err``) or *cut* (not received whole: its START row or the row of a
chained first slot damaged, or lost in a realignment); a CRC error (an increment of
``crc_err``, two cycles after a flit's last slot) is put on the received flit it checked.
A hit flit without CRC error would be an *undetected* error. The counts start at the
window (:meth:`DirectionAccount.window`: the cycle all links are up); flits sent whole
before it (the bring-up's), their CRC errors and the link drops before it are left out.

A flip in injector cycle ``c`` hits the row the sending adapter produced in cycle ``c - 1``
(the PCS transmitter's latency is 1; the block's sync header is checked against the row's
kind). Its *place* is a flit's slot row, a START row, an IDLE row, a marker row or (never
seen) a data row outside a flit. The receiver's descrambler (x^58 + x^39 + 1, in stream
order over the row's lane words) copies a payload error 39 and 58 bits further: from bit
6 of the last lane's payload on, a copy lands in the next row that is not a marker row, so
such a flip also damages the flit that row belongs to (*spill*). A sync-header flip
(bits 0-1) makes an invalid block and is not descrambled into anything else; a marker row
is not descrambled (a damaged marker makes the receiver realign). A cut flit is explained
by a damaged row that ended its chain (an invalid block where a chained flit's first slot
is, or a flip in the START row that heads the chain) or by a link drop of the receiver
around its time (a realignment).

:meth:`HitMonitor.result` also checks the recorded flips against each injector's
``o_flips`` and against :mod:`fusionfabric.sim.faults` (the injectors' model from seed
and threshold), cycle by cycle and bit by bit.
"""

from __future__ import annotations

import bisect

AM, IDLE, START, SLOT, OUTSIDE = "am", "idle", "start", "slot", "outside"
PLACES = ("flit", "start", "idle", "am", "outside", "unknown")
#: Payload bits of one lane word, and the descrambler's taps.
WORD_BITS = 64
TAPS = (39, 58)


class DirectionAccount:
    """The accounting of one link direction from per-cycle samples.

    Feed it, in cycle order, :meth:`tx` (every cycle), :meth:`rx` (every cycle),
    :meth:`crc_error` (cycles where the receiver's ``crc_err`` rose) and :meth:`flip`
    (each injector flip); then :meth:`result`.

    Parameters
    ----------
    name : str
        The direction (``up0``...).
    slots : int
        Slots of a DL flit (``4 * tl_per_dl + 1``).
    n_lanes : int
        Lanes of the direction (2: a slot per row; the monitor handles only 2).
    max_latency : int
        Longest cycles from a flit's first slot sent to received, for the search of ``L``.
    tx_latency : int
        Cycles from the adapter's row to the injector's block (PCS transmitter: 1).
    """

    def __init__(self, name: str, slots: int = 17, n_lanes: int = 2,
                 max_latency: int = 400, tx_latency: int = 1):
        self.name, self.S, self.n_lanes = name, slots, n_lanes
        self.max_latency, self.tx_latency = max_latency, tx_latency
        self.t0 = None                  # first cycle sampled
        self.w0 = None                  # first cycle counted (:meth:`window`)
        self.end = None                 # last cycle sampled
        self.tx_flits: list[dict] = []  # {"t", "words": [...]}
        self._tx_cur = None
        self.tx_partial = 0             # a new first before the flit was complete
        self.rows: dict[int, tuple] = {}   # cycle -> (kind, flit index, slot)
        self.rx_flits: list[dict] = []  # complete: {"t", "t_end", "words", "err"}
        self._rx_cur = None
        self.rx_partial = 0             # abandoned (new first, link down)
        self.crc: list[int] = []        # cycles of crc_err increments
        self.flips: list[dict] = []     # {"c", "lane", "mask", "block"}
        self.down: list[list] = []     # [cycle link went down, cycle up again]
        self._up = True

    # -- samples ------------------------------------------------------------------------
    def _seen(self, c):
        if self.t0 is None:
            self.t0 = c
        self.end = c

    def window(self, c: int):
        """Count from cycle ``c`` on: flits sent whole before it (link bring-up) are left
        out, with their CRC errors and the link drops before it. Default: the first
        sample."""
        self.w0 = c

    def tx(self, c: int, ready: bool, valid: bool, taken: bool, data: int = 0,
           first: bool = False):
        """The sending adapter in cycle ``c``: PCS ``ready``, a word offered (``valid``)
        and taken (``taken``: its ``data``, ``first``)."""
        self._seen(c)
        if not ready:
            self.rows[c] = (AM, None, None)
        elif not valid:
            self.rows[c] = (IDLE, None, None)
        elif not taken:
            self.rows[c] = (START, None, None)
        elif first:
            if self._tx_cur is not None:
                self.tx_partial += 1
            self._tx_cur = {"t": c, "words": [data]}
            self.tx_flits.append(self._tx_cur)
            self.rows[c] = (SLOT, len(self.tx_flits) - 1, 0)
            if self.S == 1:
                self._tx_cur = None
        elif self._tx_cur is not None:
            cur = self._tx_cur
            cur["words"].append(data)
            self.rows[c] = (SLOT, len(self.tx_flits) - 1, len(cur["words"]) - 1)
            if len(cur["words"]) == self.S:
                self._tx_cur = None
        else:
            self.rows[c] = (OUTSIDE, None, None)

    def rx(self, c: int, valid: bool, link_up: bool = True, data: int = 0,
           first: bool = False, err: bool = False):
        """The receiving DL's input in cycle ``c`` (taken only while ``link_up``, as the
        DL does: link down abandons a flit)."""
        self._seen(c)
        if not link_up:
            if self._up:
                self.down.append([c, None])
            self._up = False
            if self._rx_cur is not None:
                self.rx_partial += 1
                self._rx_cur = None
            return
        if not self._up:
            self.down[-1][1] = c
        self._up = True
        if not valid:
            return
        if first:
            if self._rx_cur is not None:
                self.rx_partial += 1
            self._rx_cur = {"t": c, "words": [data], "err": bool(err)}
        elif self._rx_cur is not None:
            self._rx_cur["words"].append(data)
            self._rx_cur["err"] |= bool(err)
        else:
            return
        if len(self._rx_cur["words"]) == self.S:
            self._rx_cur["t_end"] = c
            self.rx_flits.append(self._rx_cur)
            self._rx_cur = None

    def crc_error(self, c: int, n: int = 1):
        """The receiver's ``crc_err`` rose by ``n`` in cycle ``c``."""
        self._seen(c)
        self.crc.extend([c] * int(n))

    def flip(self, c: int, lane: int, mask: int, block: int | None = None):
        """Injector of lane ``lane`` (0..n_lanes-1) flips ``mask`` (bit 0 first on the
        wire) of its clean ``block`` in cycle ``c``."""
        self._seen(c)
        self.flips.append({"c": c, "lane": lane, "mask": int(mask),
                           "block": None if block is None else int(block)})

    # -- accounting ---------------------------------------------------------------------
    def _next_row(self, c):
        """The next row after cycle ``c`` that is not a marker row (None past the end)."""
        c += 1
        while self.end is not None and c <= self.end:
            kind = self.rows.get(c)
            if kind is None or kind[0] != AM:
                return c
            c += 1
        return None

    def _pair(self):
        """Pair received flits with sent ones (see the module doc); returns
        ``(pairs {rx index: tx index}, latencies seen, L, rx flits before the window)``."""
        tx_t = [f["t"] for f in self.tx_flits]
        by_t = {f["t"]: i for i, f in enumerate(self.tx_flits)}

        def identical(r):          # the nearest earlier sent flit identical to r
            if r["err"]:
                return None
            lo = bisect.bisect_left(tx_t, r["t"] - self.max_latency)
            hi = bisect.bisect_left(tx_t, r["t"])
            for k in range(hi - 1, lo - 1, -1):
                if self.tx_flits[k]["words"] == r["words"]:
                    return k
            return None

        L = None
        for r in self.rx_flits:    # L from the first received flit identical to a sent one
            k = identical(r)
            if k is not None:
                L = r["t"] - tx_t[k]
                break
        pairs, lats, pre = {}, [] if L is None else [L], set()
        for j, r in enumerate(self.rx_flits):
            i = by_t.get(r["t"] - L) if L is not None else None
            intact = (i is not None and not r["err"]
                      and self.tx_flits[i]["words"] == r["words"])
            if not intact and i is None:
                k = identical(r)
                if k is not None:           # a new latency (after a realignment)
                    i, L = k, r["t"] - tx_t[k]
                    lats.append(L)
            if i is None:
                if L is None or r["t"] - L < self.t0 or (
                        self.tx_flits and r["t"] - L < self.tx_flits[0]["t"]):
                    pre.add(j)        # sent before the monitor saw a flit start
                continue
            pairs[j] = i
        return pairs, lats, L, pre

    def _drops(self):
        """``[(first cycle down, first cycle up again or None), ...]`` at the receiver."""
        return [tuple(d) for d in self.down]

    def result(self) -> dict:
        """The accounting (a JSON-able dict; see :data:`SUMMED` for the counters)."""
        S = self.S
        pairs, lats, L, pre = self._pair()
        Lf = L or 0
        w0 = self.w0 if self.w0 is not None else (self.t0 or 0)
        tx_rx: dict[int, list[int]] = {}
        for j, i in pairs.items():
            tx_rx.setdefault(i, []).append(j)
        # CRC errors onto the received flit they checked (last slot + 2 cycles)
        by_end = {r["t_end"]: j for j, r in enumerate(self.rx_flits)}
        crc_of: dict[int, int] = {}
        unattributed = 0
        crc_early = 0
        for c in self.crc:
            j = by_end.get(c - 2)
            if j is not None and j not in crc_of:
                crc_of[j] = 1
            elif c < w0 + Lf + S + 3:
                crc_early += 1              # a flit sent before the window
            else:
                unattributed += 1
        # sent flits: intact / hit / cut / in flight (not yet checked at the end)
        last = self.end - Lf - S - 3 if self.end is not None else -1
        outcome: dict[int, str] = {}
        hit_err_only = undetected = received_twice = 0
        for i, f in enumerate(self.tx_flits):
            js = tx_rx.get(i, [])
            if f["t"] + S - 1 < w0:          # sent whole before the window
                outcome[i] = "before"
                continue
            received_twice += len(js) > 1
            if f["t"] > last or len(f["words"]) < S:
                outcome[i] = "in_flight"
            elif js:
                r = self.rx_flits[js[0]]
                same = r["words"] == f["words"]
                if same and not r["err"]:
                    outcome[i] = "intact"
                else:
                    outcome[i] = "hit"
                    hit_err_only += same
                    undetected += js[0] not in crc_of
            else:
                outcome[i] = "cut"
        n = {k: sum(1 for v in outcome.values() if v == k)
             for k in ("intact", "hit", "cut", "in_flight")}
        checked = {j for j, i in pairs.items() if outcome[i] in ("hit", "intact")}
        crc_on_hit = sum(1 for j in crc_of if j in pairs and outcome[pairs[j]] == "hit")
        crc_on_intact = sum(1 for j in crc_of if j in pairs and outcome[pairs[j]] == "intact")
        crc_in_flight = sum(1 for j in crc_of if j in pairs and outcome[pairs[j]] == "in_flight")
        early = {j for j, r in enumerate(self.rx_flits)
                 if j in pre or (j in pairs and outcome[pairs[j]] == "before")
                 or (j not in pairs and r["t_end"] < w0 + Lf)}
        crc_on_unmatched = sum(1 for j in crc_of if j not in pairs and j not in early)
        crc_pre = sum(1 for j in crc_of if j in early) + crc_early
        rx_unmatched = sum(1 for j in range(len(self.rx_flits))
                           if j not in pairs and j not in early)
        del checked
        drops = [d for d in self._drops() if d[0] >= w0]
        # every flip: its place, its effect, and the rows it damages (own row; the next
        # row when the descrambler's copy crosses into it)
        places = dict.fromkeys(PLACES, 0)
        effects: dict[str, int] = {}
        damage: dict[int, set] = {}        # tx flit -> flips that damage it
        slot0: set[int] = set()            # tx flits whose first slot row is damaged
        bad_start: set[int] = set()        # cycles of START rows with a flip
        sync_flips = spills = sync_mismatch = 0
        for n_f, fl in enumerate(self.flips):
            row_c = fl["c"] - self.tx_latency
            kind, fi, k = self.rows.get(row_c, (None, None, None))
            if kind == OUTSIDE and (not self.tx_flits or row_c < self.tx_flits[0]["t"]):
                place = "unknown"          # the tail of a flit begun before the monitor
            else:
                place = {SLOT: "flit", START: "start", IDLE: "idle", AM: "am",
                         OUTSIDE: "outside"}.get(kind, "unknown")
            places[place] += 1
            if fl["block"] is not None and kind is not None:
                want = 2 if kind in (SLOT, OUTSIDE) else 1   # sync 01 data / 10 control
                sync_mismatch += (fl["block"] & 3) != want
            sync = bool(fl["mask"] & 3)
            sync_flips += sync
            if place == "flit":
                damage.setdefault(fi, set()).add(n_f)
                if k == 0 and sync:
                    slot0.add(fi)          # an invalid block: a damaged row
                eff = f"flit_{outcome.get(fi, 'in_flight')}"
            elif place == "start":
                nxt = bisect.bisect_left([f["t"] for f in self.tx_flits], row_c)
                eff = ("start_next_cut" if outcome.get(nxt) == "cut" else "start_no_cut")
            elif place == "am":
                realign = any(fl["c"] <= d <= fl["c"] + Lf + 8 for d, _ in drops)
                eff = "am_realign" if realign else "am_no_realign"
            else:
                eff = place
            if kind == START:
                bad_start.add(row_c)
            effects[eff] = effects.get(eff, 0) + 1
            if kind != AM and not sync and fl["lane"] == self.n_lanes - 1:
                b = (fl["mask"] >> 2).bit_length() - 1        # payload bit (one flip)
                if b + max(TAPS) >= WORD_BITS:
                    nc = self._next_row(row_c)
                    nk = self.rows.get(nc) if nc is not None else None
                    if nk is not None and nk[0] == SLOT:
                        if nk[1] != fi or kind != SLOT:
                            spills += 1
                        damage.setdefault(nk[1], set()).add(n_f)
        # why each cut flit was cut: a damaged START row or chained first slot ends the
        # chain up to the next START row ("chain"); a realignment ("relock")
        cut_why = {"chain": 0, "relock": 0, "unexplained": 0}
        hit_why = {"flip": 0, "relock": 0, "unexplained": 0}
        broken = False
        prev_end = None
        for i, f in enumerate(self.tx_flits):
            if outcome[i] == "before":
                prev_end = f["t"] + S - 1
                continue
            between = range(prev_end + 1, f["t"]) if prev_end is not None else range(0)
            starts = [c for c in between if self.rows.get(c, ("",))[0] == START]
            idle = any(self.rows.get(c, ("",))[0] == IDLE for c in between)
            if starts:
                broken = starts[-1] in bad_start
            elif idle:
                broken = True                  # (the transmitter always sends a START)
            elif i in slot0:
                broken = True                  # an invalid block where a chained flit starts
            prev_end = f["t"] + S - 1
            t_rx = f["t"] + Lf
            near = any(d - S - 2 <= t_rx and (u is None or t_rx <= u + 20 * S)
                       for d, u in drops)
            if outcome[i] == "cut":
                why = "chain" if broken else ("relock" if near else "unexplained")
                cut_why[why] += 1
            elif outcome[i] == "hit":
                why = "flip" if i in damage else ("relock" if near else "unexplained")
                hit_why[why] += 1
            if outcome[i] in ("hit", "intact"):
                broken = False
        return {
            "direction": self.name,
            "latency": L, "latencies": lats,
            "tx_flits": sum(1 for v in outcome.values() if v != "before"),
            "rx_flits": len(self.rx_flits) - len(early),
            "flits_intact": n["intact"], "flits_hit": n["hit"], "flits_cut": n["cut"],
            "flits_in_flight": n["in_flight"],
            "flits_hit_by_flip": hit_why["flip"], "flits_hit_in_relock": hit_why["relock"],
            "flits_hit_unexplained": hit_why["unexplained"],
            "flits_cut_chain": cut_why["chain"], "flits_cut_relock": cut_why["relock"],
            "flits_cut_unexplained": cut_why["unexplained"],
            "flits_hit_err_only": hit_err_only,
            "flits_received_twice": received_twice,
            "crc_err": len(self.crc), "crc_err_on_hit": crc_on_hit,
            "crc_err_on_intact": crc_on_intact, "crc_err_on_unmatched": crc_on_unmatched,
            "crc_err_in_flight": crc_in_flight,
            "crc_err_before_window": crc_pre, "crc_err_unattributed": unattributed,
            "undetected": undetected,
            "rx_unmatched": rx_unmatched, "rx_before_window": len(early),
            "rx_partial": self.rx_partial, "tx_partial": self.tx_partial,
            "link_drops": len(drops),
            "flips": len(self.flips), "flips_by_place": places, "flips_by_effect": effects,
            "flips_sync_header": sync_flips, "flips_spilling_into_next_flit": spills,
            "sync_mismatch": sync_mismatch,
            "flits_damaged_twice": sum(1 for i, v in damage.items() if len(v) >= 2
                                       and outcome.get(i) != "in_flight"),
            # hit flits by the number of flips whose bits (or copies) they carry
            "hit_flits_by_flips": {str(k): v for k, v in sorted(_hist(
                len(damage.get(i, ())) for i, o in outcome.items() if o == "hit").items())},
            "flits_damaged_not_hit": sum(1 for i in damage if outcome.get(i) == "intact"),
        }


def _hist(values) -> dict:
    out: dict[int, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


#: Counters summed over the directions by :func:`totals`.
SUMMED = ("tx_flits", "rx_flits", "flits_intact", "flits_hit", "flits_cut",
          "flits_in_flight", "flits_hit_by_flip", "flits_hit_in_relock",
          "flits_hit_unexplained", "flits_cut_chain", "flits_cut_relock",
          "flits_cut_unexplained", "flits_hit_err_only", "flits_received_twice", "crc_err",
          "crc_err_on_hit", "crc_err_on_intact", "crc_err_on_unmatched", "crc_err_in_flight",
          "crc_err_before_window", "crc_err_unattributed", "undetected", "rx_unmatched",
          "rx_before_window", "rx_partial", "tx_partial", "link_drops", "flips",
          "flips_sync_header", "flips_spilling_into_next_flit", "sync_mismatch",
          "flits_damaged_twice", "flits_damaged_not_hit")


def totals(dirs: list[dict]) -> dict:
    """The directions' counters summed, with ``flips_by_place``/``flips_by_effect``."""
    out = {k: sum(int(d[k]) for d in dirs) for k in SUMMED}
    for key in ("flips_by_place", "flips_by_effect", "hit_flits_by_flips"):
        acc: dict[str, int] = {}
        for d in dirs:
            for k, v in d[key].items():
                acc[k] = acc.get(k, 0) + int(v)
        out[key] = acc
    return out


# -- the cocotb monitor -------------------------------------------------------------------
class _Dir:
    """Handles of one link direction."""

    def __init__(self, dut, name, src, dst, lanes, slots):
        g = lambda path: _handle(dut, path)   # noqa: E731
        self.name = name
        self.acct = DirectionAccount(name, slots, n_lanes=len(lanes))
        self.o_valid, self.o_ready = g(f"{src}.o_phy__valid"), g(f"{src}.o_phy__ready")
        self.o_payload = g(f"{src}.o_phy__payload")
        self.row_ready = g(f"{name}_txad.o_row__ready")
        self.i_valid, self.i_payload = g(f"{dst}.i_phy__valid"), g(f"{dst}.i_phy__payload")
        self.link_up = g(f"{dst}.i_link_up")
        self.crc = g(f"{dst}.dl_rx.o_crc_err")
        self.crc_last = None
        self.lanes = [(idx, g(f"{name}_lane{k}.flip"), g(f"{name}_lane{k}.cur"),
                       g(f"{name}_lane{k}.i_lane")) for k, idx in enumerate(lanes)]


def _handle(dut, path):
    h = dut
    for part in path.split("."):
        h = getattr(h, part)
    return h


def _v(h) -> int:
    v = h.value
    try:
        return int(v.to_unsigned()) if hasattr(v, "to_unsigned") else int(v)
    except ValueError:                    # X or Z bits (before the links are up): 0
        return int(str(v).translate(str.maketrans("xXzZuUwW-", "000000000")) or "0", 2)


class HitMonitor:
    """Per-cycle samples of every link direction into :class:`DirectionAccount` objects.

    ``tb`` is a :class:`fusionfabric.tb.fabric.fabric_tb.FabricTB` on Icarus with 64b/66b
    lanes, 2 per direction. :meth:`start` after reset, :meth:`open_window` once the links
    are up (before the bit error rate is set); :meth:`result` at the end (a dict for the
    results file)."""

    def __init__(self, tb):
        from fusionfabric.formats.chiplet import dl_flit_slots
        if tb.sim != "icarus":
            raise ValueError(f"count_hits needs Icarus (it reads the chiplets' internal "
                             f"signals), not {tb.sim}")
        if tb.lane_profile != "64b66b" or any(k != 2 for k in tb.lanes):
            raise ValueError("count_hits needs 64b/66b lanes, 2 per direction")
        self.tb = tb
        slots = dl_flit_slots(int(tb.params.get("tl_per_dl", 4)))
        self.dirs = []
        for e in range(tb.n):
            for d, (name, src, dst) in enumerate(((f"up{e}", f"ep{e}", f"sc{e}"),
                                                   (f"down{e}", f"sc{e}", f"ep{e}"))):
                lanes = [tb.lane(e, d, k) for k in range(tb.lanes[e])]
                self.dirs.append(_Dir(tb.dut, name, src, dst, lanes, slots))
        self.cycle = 0
        self.last_time = None
        self.running = False

    def start(self):
        """Sample from the next cycle on (after reset: the monitor only reads, so the run
        is the same with it as without)."""
        import cocotb
        self.running = True
        cocotb.start_soon(self._run())

    def open_window(self):
        """Count from the next cycle on (once the links are up, before the bit errors)."""
        for dr in self.dirs:
            dr.acct.window(self.cycle + 1)

    async def _run(self):
        from cocotb.triggers import FallingEdge, ReadOnly
        from cocotb.utils import get_sim_time
        clk = self.tb.clk
        for dr in self.dirs:
            dr.crc_last = _v(dr.crc)
        while self.running:
            await FallingEdge(clk)
            await ReadOnly()
            if not self.running:
                return
            self.cycle += 1
            self.last_time = get_sim_time()
            self._sample(self.cycle)

    def _sample(self, c):
        """Every direction's signals in cycle ``c`` (read in the ReadOnly phase after the
        falling edge)."""
        for dr in self.dirs:
            a = dr.acct
            ready = _v(dr.row_ready)
            valid = _v(dr.o_valid)
            taken = valid and _v(dr.o_ready)
            if taken:
                p = _v(dr.o_payload)
                a.tx(c, ready, valid, True, p & ((1 << 128) - 1), bool(p >> 128 & 1))
            else:
                a.tx(c, ready, valid, False)
            up = _v(dr.link_up)
            if up and _v(dr.i_valid):
                p = _v(dr.i_payload)
                a.rx(c, True, True, p & ((1 << 128) - 1), bool(p >> 128 & 1),
                     bool(p >> 129 & 1))
            else:
                a.rx(c, False, bool(up))
            crc = _v(dr.crc)
            if crc != dr.crc_last:
                a.crc_error(c, (crc - dr.crc_last) & 0xFFFF)
                dr.crc_last = crc
            for k, (_, flip, cur, i_lane) in enumerate(dr.lanes):
                if _v(flip):
                    blk = _v(i_lane)
                    a.flip(c, k, _v(cur) ^ blk, blk)

    def _flips_counter_check(self) -> dict:
        """Each lane's ``o_flips`` (the flips of the cycles before this one) against the
        flips the monitor recorded."""
        bad = {}
        for dr in self.dirs:
            for k, (idx, *_rest) in enumerate(dr.lanes):
                seen = sum(1 for f in dr.acct.flips if f["lane"] == k and f["c"] < self.cycle)
                got = self.tb.flips(idx)
                if got != seen:
                    bad[str(idx)] = [got, seen]
        return bad

    def model_check(self) -> dict:
        """The recorded flips against :mod:`fusionfabric.sim.faults` (the injectors'
        model from seed and threshold): the same cycles and bits, lane by lane."""
        from fusionfabric.sim.faults import error_masks, generator_streams, bits_to_ints
        import numpy as np
        tb = self.tb
        thr = int(getattr(tb, "threshold", 0))
        seed0 = int(tb.params.get("fault_seed", 1))
        out = {"lanes": 0, "agree": 0, "flips": 0}
        for dr in self.dirs:
            for k, (idx, *_rest) in enumerate(dr.lanes):
                seen = [(f["c"], f["mask"]) for f in dr.acct.flips if f["lane"] == k]
                out["lanes"] += 1
                out["flips"] += len(seen)
                if not seen:
                    out["agree"] += 1
                    continue
                horizon = self.cycle + 20_000
                xs, _ = generator_streams(seed0 * 1000003 + idx, horizon)
                fire = np.nonzero(xs.astype(np.int64) <= thr)[0]
                masks = error_masks(seed0 * 1000003 + idx, horizon, thr, bursts=False)
                model = {int(t): bits_to_ints(masks[t:t + 1])[0] for t in fire}
                # the cycle offset (monitor cycle - model cycle) that maps the first
                # recorded flip onto a model event with its mask
                c1, m1 = seen[0]
                ok = False
                for t in fire:
                    off = c1 - int(t)
                    if model[int(t)] != m1:
                        continue
                    span = [(int(t2) + off, model[int(t2)]) for t2 in fire
                            if seen[0][0] <= int(t2) + off <= seen[-1][0]]
                    if span == seen:
                        ok = True
                        break
                out["agree"] += ok
        return out

    def result(self) -> dict:
        """Stop, and the accounting. Call it in the ReadOnly phase after a falling edge
        (``FabricTB.sample``): this cycle is sampled too if the monitor has not yet."""
        from cocotb.utils import get_sim_time
        if self.running and self.last_time != get_sim_time():
            self.cycle += 1
            self.last_time = get_sim_time()
            self._sample(self.cycle)
        self.running = False
        dirs = [dr.acct.result() for dr in self.dirs]
        out = {"directions": dirs, "total": totals(dirs),
               "o_flips_mismatch": self._flips_counter_check(),
               "cycles": self.cycle}
        dump = self.tb.args.get("hits_dump")
        if dump:                          # the raw samples, for offline analysis
            import pickle
            with open(dump, "wb") as fh:
                pickle.dump([dr.acct for dr in self.dirs], fh)
        try:
            out["model"] = self.model_check()
        except Exception as exc:          # the check is extra: report, do not hide
            out["model"] = {"error": repr(exc)}
        return out
