"""Drivers and monitors for Amaranth ``lib.stream`` ports, bound by name.

A stream port ``i_data`` of a converted component appears in Verilog as
``i_data__payload``, ``i_data__valid`` and ``i_data__ready`` (``ready`` is absent for an
always-ready stream, ``valid`` for an always-valid one). Payload structs are one flat
vector; pack and unpack them with :class:`fusionfabric.sim.bitfields.Fields`.

Timing discipline (identical on Icarus and Verilator): the testbench drives at the
falling edge, then waits for ``ReadOnly`` and samples ``valid``/``ready``; a beat with both
high there transfers at the next rising edge. Reading at the rising edge is not portable
(Verilator runs the edge's updates before value-change callbacks).
"""

from __future__ import annotations

from collections import deque
from typing import Callable

import cocotb
from cocotb.triggers import Event, FallingEdge, ReadOnly

__all__ = ["StreamSource", "StreamSink", "stream_ports", "to_int"]


def to_int(value) -> int:
    """A sampled signal value as an unsigned int (1-bit handles give a ``Logic``)."""
    return int(value.to_unsigned()) if hasattr(value, "to_unsigned") else int(value)


def stream_ports(dut, name: str):
    """``(payload, valid, ready)`` handles of stream port ``name`` (None where absent)."""
    def get(suffix):
        full = f"{name}__{suffix}"
        return getattr(dut, full) if hasattr(dut, full) else None

    payload, valid, ready = get("payload"), get("valid"), get("ready")
    if payload is None:
        raise AttributeError(f"{dut._name} has no stream port {name!r} ({name}__payload)")
    return payload, valid, ready


class StreamSource:
    """Feeds words into a DUT stream input, with random idle cycles.

    Parameters
    ----------
    dut, name : the DUT handle and the stream port name (``"i_data"``).
    clk : the clock handle.
    rng : ``numpy.random.Generator`` for the idle pattern (seeded by the TB).
    idle : probability of inserting an idle (``valid`` low) cycle before a beat.
    watchdog : optional :class:`~tb.common.watchdog.Watchdog` kicked on every beat.
    """

    def __init__(self, dut, name: str, clk, rng=None, idle: float = 0.0, watchdog=None):
        self.name = name
        self.payload, self.valid, self.ready = stream_ports(dut, name)
        if self.valid is None:
            raise AttributeError(f"stream {name} has no valid; it cannot be driven")
        self.clk = clk
        self.rng = rng
        self.idle = float(idle)
        if not 0.0 <= self.idle < 1.0:
            raise ValueError(f"idle={idle} must be in [0, 1)")
        self.watchdog = watchdog
        self.queue: deque[int] = deque()
        self.sent = 0
        self.cycle = 0
        self.on_send: list[Callable[[int, int], None]] = []
        self._empty = Event()
        self._empty.set()
        self.valid.value = 0
        self._task = cocotb.start_soon(self._run())

    def send(self, word: int) -> None:
        self.queue.append(int(word))
        self._empty.clear()

    def send_many(self, words) -> None:
        for w in words:
            self.send(w)

    @property
    def idle_now(self) -> bool:
        return not self.queue and self._current is None

    async def wait_idle(self) -> None:
        """Return once every queued word has been accepted by the DUT."""
        while self.queue or self._current is not None:
            self._empty.clear()
            await self._empty.wait()

    _current = None

    async def _run(self):
        fire = False
        while True:
            await FallingEdge(self.clk)
            self.cycle += 1
            if fire:
                word, self._current = self._current, None
                self.sent += 1
                if self.watchdog:
                    self.watchdog.kick(f"{self.name} sent #{self.sent}")
                for cb in self.on_send:
                    cb(word, self.cycle)
            if self._current is None and self.queue:
                if self.rng is None or self.idle == 0 or self.rng.random() >= self.idle:
                    self._current = self.queue.popleft()
            if self._current is None:
                self.valid.value = 0
                if not self.queue:
                    self._empty.set()
            else:
                self.payload.value = self._current
                self.valid.value = 1
            await ReadOnly()
            fire = self._current is not None and (
                self.ready is None or int(self.ready.value) == 1)


class StreamSink:
    """Collects words from a DUT stream output, with random backpressure.

    ``backpressure`` is the probability that ``ready`` is low in a cycle. Each beat is
    appended to ``self.queue`` (unless ``keep=False``) and handed to every ``on_beat``
    callback as ``(word, cycle)``.
    """

    def __init__(self, dut, name: str, clk, rng=None, backpressure: float = 0.0,
                 watchdog=None, keep: bool = True):
        self.name = name
        self.payload, self.valid, self.ready = stream_ports(dut, name)
        self.clk = clk
        self.rng = rng
        self.backpressure = float(backpressure)
        if not 0.0 <= self.backpressure < 1.0:
            raise ValueError(f"backpressure={backpressure} must be in [0, 1)")
        self.watchdog = watchdog
        self.keep = keep
        self.queue: deque[int] = deque()
        self.count = 0
        self.cycle = 0
        self.paused = False
        self.on_beat: list[Callable[[int, int], None]] = []
        self._beat = Event()
        if self.ready is not None:
            self.ready.value = 0
        self._task = cocotb.start_soon(self._run())

    async def recv(self) -> int:
        while not self.queue:
            self._beat.clear()
            await self._beat.wait()
        return self.queue.popleft()

    async def wait_count(self, n: int) -> None:
        while self.count < n:
            self._beat.clear()
            await self._beat.wait()

    async def _run(self):
        while True:
            await FallingEdge(self.clk)
            self.cycle += 1
            if self.ready is not None:
                hold = self.paused or (self.rng is not None and self.backpressure > 0
                                       and self.rng.random() < self.backpressure)
                self.ready.value = 0 if hold else 1
            await ReadOnly()
            valid = self.valid is None or int(self.valid.value) == 1
            ready = self.ready is None or not (self.paused or int(self.ready.value) == 0)
            if valid and ready:
                word = to_int(self.payload.value)
                self.count += 1
                if self.keep:
                    self.queue.append(word)
                if self.watchdog:
                    self.watchdog.kick(f"{self.name} beat #{self.count}")
                for cb in self.on_beat:
                    cb(word, self.cycle)
                self._beat.set()
