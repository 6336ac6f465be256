"""Ready/valid stream driver and receiver for the Amaranth simulator (async testbenches).

The cocotb side has :mod:`.stream`; this module is its counterpart for unit tests that run
a component in ``amaranth.sim`` directly. Both follow the ``amaranth.lib.stream`` rules: a
source raises ``valid`` without waiting for ``ready`` and holds the payload until the beat
is taken; a beat transfers on a clock edge where ``valid`` and ``ready`` are both high.

- :class:`StreamSender` sends payloads on a stream input, with a random idle cycle
  (``valid`` low) before each beat with probability ``idle``, or a given number of idle
  cycles before each beat (``idle`` a sequence).
- :class:`StreamReceiver` takes a number of beats from a stream output, holding ``ready``
  low in a cycle with probability ``backpressure``, or following a given ``ready``
  schedule; it fails a run that stalls.
- :func:`run_stream` wires one of each around a component and returns what came out.

Both take two hooks: ``on_beat(ctx, word)`` after the clock edge that took each beat, and
``on_cycle(ctx, valid, ready)`` after every clock edge they wait, with ``valid`` and
``ready`` as sampled at that edge (for per-cycle checks: e.g. what a sink does in a cycle
with ``ready`` high and ``valid`` low, or in which cycles ``ready`` may be high).

Every random choice comes from a ``numpy.random.Generator`` made from a seed; the seed is
in every failure message. Payloads are integers (the flat bits of the payload, as
``Value.cast(port.payload)``).
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Value

__all__ = ["StreamSender", "StreamReceiver", "StreamStall", "run_stream", "make_rng"]


class StreamStall(AssertionError):
    """A receiver waited ``max_cycles`` without getting all its beats."""


def make_rng(seed) -> tuple[np.random.Generator, object]:
    """``(rng, seed)`` from an int or sequence seed; a Generator is used as is (its seed
    is then reported as ``"given rng"``)."""
    if isinstance(seed, np.random.Generator):
        return seed, "given rng"
    if seed is None:
        raise TypeError("seed must be an int, a sequence of ints or a numpy Generator, "
                        "not None (every random stream is seeded)")
    return np.random.default_rng(seed), seed


def _check_probability(name: str, p: float) -> float:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name}={p!r} must be in [0, 1)")
    return float(p)


def _idle_schedule(idle):
    """``(probability, schedule)`` from a float or a sequence of idle-cycle counts."""
    if isinstance(idle, (int, float)) and not isinstance(idle, bool):
        return _check_probability("idle", idle), None
    try:
        sched = [int(n) for n in idle]
    except TypeError:
        raise TypeError(f"idle={idle!r} must be a probability or a sequence of idle-cycle "
                        "counts") from None
    bad = [n for n in sched if n < 0]
    if bad:
        raise ValueError(f"idle count {bad[0]} must be >= 0")
    return 0.0, sched


class StreamSender:
    """Sends payloads on a stream input (``valid``, ``ready``, ``payload``).

    Parameters
    ----------
    port : amaranth.lib.stream.Interface
        The component's stream input (e.g. ``dut.i_data``). A port with ``valid`` and
        ``payload`` and no ``ready`` member (an input that takes a beat in every cycle
        ``valid`` is high, such as a row from a PCS) is driven as always ready.
    payloads : iterable of int
        The beats, in order.
    seed : int, sequence of int or numpy.random.Generator
        Seed of the idle pattern.
    idle : float or sequence of int
        Probability of an idle cycle (``valid`` low) before each beat; it repeats, so a
        beat waits a geometric number of cycles. 0 gives one beat per cycle. A sequence
        instead gives the number of idle cycles before each beat (``idle[i]`` before beat
        ``i``; none before beats past its end) and no random draw.
    on_beat : callable, optional
        ``on_beat(ctx, word)``, called right after the clock edge that took each beat
        (``ctx.get`` then reads the component's state after that edge), e.g. to sample
        status outputs per beat.
    on_cycle : callable, optional
        ``on_cycle(ctx, valid, ready)``, called right after every clock edge the sender
        waits (before ``on_beat`` of a beat taken at that edge), with ``valid`` and
        ``ready`` as sampled at that edge.
    stop_after : int, optional
        End the run after this many clock edges even if payloads are left (``valid`` is
        then dropped); ``None`` runs until every payload is sent.

    Members
    -------
    sent : list of int
        The beats taken by the component so far.
    cycles : int
        Clock edges this sender has waited.
    """

    def __init__(self, port, payloads, *, seed=0, idle=0.0, on_beat=None,
                 on_cycle=None, stop_after: int | None = None):
        if stop_after is not None and stop_after < 0:
            raise ValueError(f"stop_after={stop_after!r} must be >= 0 or None")
        self.port = port
        self.on_beat = on_beat
        self.on_cycle = on_cycle
        self.stop_after = stop_after
        self.payloads = list(payloads)
        self.rng, self.seed = make_rng(seed)
        self.idle, self.idle_schedule = _idle_schedule(idle)
        self.sent: list[int] = []
        self.cycles = 0

    async def run(self, ctx):
        """The testbench coroutine: ``sim.add_testbench(sender.run, background=True)``."""
        payload = Value.cast(self.port.payload)
        port_ready = getattr(self.port, "ready", None)

        async def edge(valid):
            if port_ready is None:
                await ctx.tick()
                ready = 1
            else:
                _, _, ready = await ctx.tick().sample(port_ready)
            self.cycles += 1
            if self.on_cycle is not None:
                self.on_cycle(ctx, valid, int(ready))
            return ready

        def out_of_time():
            return self.stop_after is not None and self.cycles >= self.stop_after

        for index, word in enumerate(self.payloads):
            if self.idle_schedule is not None:
                wait = self.idle_schedule[index] if index < len(self.idle_schedule) else 0
                for _ in range(wait):
                    if out_of_time():
                        break
                    ctx.set(self.port.valid, 0)
                    await edge(0)
            while self.idle and self.rng.random() < self.idle:
                if out_of_time():
                    break
                ctx.set(self.port.valid, 0)
                await edge(0)
            if out_of_time():
                break
            ctx.set(payload, word)
            ctx.set(self.port.valid, 1)
            while not out_of_time():
                if await edge(1):
                    break
            else:
                break
            self.sent.append(int(word))
            if self.on_beat is not None:
                self.on_beat(ctx, int(word))
        ctx.set(self.port.valid, 0)


class StreamReceiver:
    """Takes ``count`` beats from a stream output, with random or scheduled backpressure.

    Parameters
    ----------
    port : amaranth.lib.stream.Interface
        The component's stream output (e.g. ``dut.o_data``).
    count : int or None
        Beats to receive. ``None``: take every beat offered during ``max_cycles`` cycles
        and end then, without a stall check (for an output whose beat count the test
        cannot know in advance).
    seed : int, sequence of int or numpy.random.Generator
        Seed of the backpressure pattern.
    backpressure : float
        Probability of ``ready`` low in a cycle. 0 keeps ``ready`` high.
    ready : callable or sequence of bool, optional
        A fixed ``ready`` schedule instead of the random one: ``ready(cycle) -> bool``, or
        a sequence (``ready[cycle]``; high past its end), ``cycle`` counted from this
        receiver's start. Not with ``backpressure``.
    max_cycles : int
        Cycles without all beats after which the run fails with :class:`StreamStall`
        (with ``count=None``: the length of the run).
    quiet_cycles : int
        After the last beat, cycles with ``ready`` high in which no further beat may
        appear (0: no check).
    on_beat : callable, optional
        ``on_beat(ctx, word)``, called right after the clock edge that took each beat.
    on_cycle : callable, optional
        ``on_cycle(ctx, valid, ready)``, called right after every clock edge until the
        last beat (before ``on_beat`` of a beat taken at that edge), with ``valid`` and
        ``ready`` as sampled at that edge.

    Members
    -------
    received : list of int
        The beats taken so far.
    cycles : list of int
        Cycle (counted from this receiver's start) of each beat.
    """

    def __init__(self, port, count: int | None, *, seed=0, backpressure: float = 0.0,
                 ready=None, max_cycles: int = 100_000, quiet_cycles: int = 0,
                 on_beat=None, on_cycle=None):
        if count is not None and count < 0:
            raise ValueError(f"count={count!r} must be >= 0 or None")
        if ready is not None and not callable(ready):
            try:
                ready = [bool(r) for r in ready]
            except TypeError:
                raise TypeError(f"ready={ready!r} must be a callable ready(cycle) -> bool "
                                "or a sequence of bool") from None
        if ready is not None and backpressure:
            raise ValueError(f"backpressure={backpressure!r} and a ready schedule: give "
                             "one of them")
        self.ready = ready
        self.port = port
        self.count = count
        self.rng, self.seed = make_rng(seed)
        self.backpressure = _check_probability("backpressure", backpressure)
        self.max_cycles = max_cycles
        self.quiet_cycles = quiet_cycles
        self.on_beat = on_beat
        self.on_cycle = on_cycle
        self.received: list[int] = []
        self.cycles: list[int] = []

    async def run(self, ctx):
        """The testbench coroutine: ``sim.add_testbench(receiver.run)``."""
        payload = Value.cast(self.port.payload)
        cycle = 0
        while self.count is None or len(self.received) < self.count:
            if self.count is None and cycle >= self.max_cycles:
                break
            if cycle >= self.max_cycles:
                raise StreamStall(f"stream stalled: {len(self.received)} of {self.count} "
                                  f"beats after {cycle} cycles (seed {self.seed})")
            if self.ready is None:
                ready = int(not (self.backpressure and
                                 self.rng.random() < self.backpressure))
            elif callable(self.ready):
                ready = int(bool(self.ready(cycle)))
            else:
                ready = int(self.ready[cycle]) if cycle < len(self.ready) else 1
            ctx.set(self.port.ready, ready)
            _, _, valid, word = await ctx.tick().sample(self.port.valid, payload)
            if self.on_cycle is not None:
                self.on_cycle(ctx, int(valid), ready)
            if valid and ready:
                self.received.append(int(word))
                self.cycles.append(cycle)
                if self.on_beat is not None:
                    self.on_beat(ctx, int(word))
            cycle += 1
        ctx.set(self.port.ready, 1)
        for _ in range(self.quiet_cycles):
            _, _, valid = await ctx.tick().sample(self.port.valid)
            if valid:
                raise AssertionError(f"extra beat after the expected {self.count} "
                                     f"(seed {self.seed})")


def run_stream(dut, i_port, o_port, payloads, count: int, *, seed=0, idle: float = 0.0,
               backpressure: float = 0.0, max_cycles: int = 100_000, quiet_cycles: int = 5,
               extra=(), probes=None) -> list[int]:
    """Send ``payloads`` into ``i_port`` and return the ``count`` beats of ``o_port``.

    ``i_port``/``o_port`` are stream interfaces of ``dut`` or their attribute names. The
    sender and the receiver draw from two streams of one seed (``[seed, 0]`` and
    ``[seed, 1]``). ``extra``: more testbench coroutines run in the background (e.g. a
    second sender). ``probes``: ``{name: signal}``, filled with the values at the end.
    """
    from amaranth.sim import Simulator

    if isinstance(i_port, str):
        i_port = getattr(dut, i_port)
    if isinstance(o_port, str):
        o_port = getattr(dut, o_port)
    if isinstance(seed, np.random.Generator):
        s_seed = r_seed = seed
    else:
        if seed is None:
            make_rng(seed)
        base = list(seed) if isinstance(seed, (list, tuple)) else [seed]
        s_seed, r_seed = [*base, 0], [*base, 1]
    sender = StreamSender(i_port, payloads, seed=s_seed, idle=idle)
    receiver = StreamReceiver(o_port, count, seed=r_seed, backpressure=backpressure,
                              max_cycles=max_cycles, quiet_cycles=quiet_cycles)
    if not isinstance(seed, np.random.Generator):
        sender.seed = receiver.seed = seed     # failures name the seed given here

    async def finish(ctx):
        await receiver.run(ctx)
        for key, sig in (probes or {}).items():
            probes[key] = ctx.get(sig)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(sender.run, background=True)
    for coro in extra:
        sim.add_testbench(coro, background=True)
    sim.add_testbench(finish)
    sim.run()
    return receiver.received
