"""Deskew and reorder of the FEC PCS receiver's lanes (after :class:`~.lock.LaneLock`)."""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from fusionfabric.formats import fec as code
from fusionfabric.rtl.fec.lock import ID_BITS

__all__ = ["Deskew"]

SB = code.M


class Deskew(wiring.Component):
    """Line up the lane beats of ``n_lanes`` locked lanes on their markers and put each in
    the logical position of its lane id.

    Each physical lane writes its beats into a circular buffer of ``depth`` beats while it
    is locked. Until the lanes are aligned, a lane restarts its buffer at every marker beat
    (the beat that starts a marker codeword goes to address 0), so the buffer holds the
    lane's latest marker and the beats after it. The lanes are *aligned* in a cycle where
    a lane writes its marker and

    - every lane is locked, the ids are a permutation of ``0..n_lanes-1``,
    - every lane's latest marker is in its buffer (written at most ``A = ceil(max_skew /
      S)`` cycles ago; lanes whose marker is due later than the latest by more than the
      buffer holds wait for the next period), and
    - the skew in symbols, max minus min over the lanes of ``age * S - e`` (``age``:
      cycles since the lane's marker beat, ``e``: the lane's symbol offset, so this is the
      marker's arrival in symbols, counted backwards), is at most ``max_skew``: the
      arrival difference of :func:`fusionfabric.sim.fec_pcs.receive`'s ``skew``.

    From the next cycle (``o_start``) every buffer is read at the same address, 0 first:
    the beats of all lanes belong to the same codeword beat, a marker codeword's first.
    The read pointers then advance every cycle with the write pointers, so each lane keeps
    its delay. ``o_aligned`` falls (and the buffers restart at markers) as soon as a lane
    is not locked.

    Members
    -------
    i_beat : In(10 S).array(n_lanes); i_marker, i_locked : In(1).array(n_lanes)
    i_id : In(5).array(n_lanes); i_offset : In(range(S)).array(n_lanes)
        The :class:`~.lock.LaneLock` outputs of each physical lane.
    o_beats : Out(10 S).array(n_lanes)
        The deskewed beats by logical lane (valid while ``o_aligned``).
    o_aligned, o_start : Out(1)
        The lanes are aligned; the first aligned beat (a marker codeword's first beat).
    o_skew : Out(range(max_skew + S + 1))
        The skew in symbols measured at the last alignment.
    """

    def __init__(self, n_lanes: int, S: int, max_skew: int):
        self.n_lanes, self.S, self.max_skew = n_lanes, S, max_skew
        self.age_max = -(-max_skew // S)
        self.depth = self.age_max + 2
        off = range(max(S, 2))
        super().__init__({
            "i_beat": In(SB * S).array(n_lanes),
            "i_marker": In(1).array(n_lanes),
            "i_locked": In(1).array(n_lanes),
            "i_id": In(ID_BITS).array(n_lanes),
            "i_offset": In(off).array(n_lanes),
            "o_beats": Out(SB * S).array(n_lanes),
            "o_aligned": Out(1),
            "o_start": Out(1),
            "o_skew": Out(range(max_skew + S + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        n, S, A, D = self.n_lanes, self.S, self.age_max, self.depth
        aligned = self.o_aligned
        rd_ptr = Signal(range(D))
        datas, oks, restarts, vals = [], [], [], []
        vmax = (A + 1) * S + S
        for p in range(n):
            mem = memory.Memory(shape=SB * S, depth=D, init=[])
            m.submodules[f"buf{p}"] = mem
            wp = mem.write_port()
            rp = mem.read_port(domain="comb")
            wr_ptr = Signal(range(D), name=f"wr_ptr{p}")
            age = Signal(range(A + 2), name=f"age{p}")
            has = Signal(name=f"has_marker{p}")
            restart = Signal(name=f"restart{p}")
            locked = self.i_locked[p]
            m.d.comb += [restart.eq(~aligned & locked & self.i_marker[p]),
                         wp.addr.eq(Mux(restart, 0, wr_ptr)), wp.data.eq(self.i_beat[p]),
                         wp.en.eq(locked), rp.addr.eq(rd_ptr)]
            with m.If(locked):
                m.d.sync += wr_ptr.eq(Mux(restart, 1, Mux(wr_ptr == D - 1, 0, wr_ptr + 1)))
            with m.If(restart):
                m.d.sync += [age.eq(1), has.eq(1)]
            with m.Elif(age != A + 1):
                m.d.sync += age.eq(age + 1)
            with m.If(~locked):
                m.d.sync += has.eq(0)
            ok = Signal(name=f"ok{p}")
            val = Signal(range(vmax + 1), name=f"arrival{p}")
            age_now = Mux(restart, 0, age)
            m.d.comb += [ok.eq(locked & (restart | (has & (age <= A)))),
                         val.eq(age_now * S + (S - 1) - self.i_offset[p])]
            datas.append(rp.data)
            oks.append(ok)
            restarts.append(restart)
            vals.append(val)

        hi = vals[0]
        lo = vals[0]
        for v in vals[1:]:
            hi = Mux(v > hi, v, hi)
            lo = Mux(v < lo, v, lo)
        skew = Signal(range(vmax + 1))
        m.d.comb += skew.eq(hi - lo)
        perm = Const(1, 1)
        for k in range(n):
            present = Const(0, 1)
            for p in range(n):
                present = present | (self.i_id[p] == k)
            perm = perm & present
        all_ok = Const(1, 1)
        any_restart = Const(0, 1)
        for p in range(n):
            all_ok = all_ok & oks[p]
            any_restart = any_restart | restarts[p]
        event = Signal()
        m.d.comb += event.eq(~aligned & all_ok & any_restart & perm & (skew <= self.max_skew))

        all_locked = Const(1, 1)
        for p in range(n):
            all_locked = all_locked & self.i_locked[p]
        m.d.sync += self.o_start.eq(event)
        with m.If(event):
            m.d.sync += [aligned.eq(1), rd_ptr.eq(0), self.o_skew.eq(skew)]
        with m.Elif(aligned):
            m.d.sync += rd_ptr.eq(Mux(rd_ptr == D - 1, 0, rd_ptr + 1))
        with m.If(~all_locked):
            m.d.sync += aligned.eq(0)

        for k in range(n):
            out = datas[0]
            for p in range(1, n):
                out = Mux(self.i_id[p] == k, datas[p], out)
            m.d.comb += self.o_beats[k].eq(out)
        return m
