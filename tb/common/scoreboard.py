"""Scoreboards: in-order for links and pipelines, keyed by (source, destination) for switches.

Every test ends with :meth:`check_empty`, which fails if anything expected never came.
Mismatches name the scoreboard, the item index, both values and the seed.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Hashable

__all__ = ["ScoreboardError", "InOrderScoreboard", "KeyedScoreboard"]


class ScoreboardError(AssertionError):
    pass


def _fmt(x: Any) -> str:
    return hex(x) if isinstance(x, int) else repr(x)


class InOrderScoreboard:
    """Items must arrive exactly in the order they were expected."""

    def __init__(self, name: str = "scoreboard", seed: int | None = None,
                 fmt: Callable[[Any], str] = _fmt, watchdog=None):
        self.name = name
        self.seed = seed
        self.fmt = fmt
        self.watchdog = watchdog
        self.expected: deque = deque()
        self.matched = 0

    def expect(self, item: Any) -> None:
        self.expected.append(item)

    def expect_many(self, items) -> None:
        self.expected.extend(items)

    def observe(self, item: Any, *_: Any) -> None:
        """Compare ``item`` with the oldest expected one (extra args, e.g. a cycle, ignored)."""
        if not self.expected:
            raise ScoreboardError(
                f"{self.name}: unexpected item #{self.matched}: {self.fmt(item)} "
                f"(nothing expected; seed {self.seed})")
        want = self.expected.popleft()
        if want != item:
            raise ScoreboardError(
                f"{self.name}: item #{self.matched} mismatch: got {self.fmt(item)}, "
                f"expected {self.fmt(want)} (seed {self.seed})")
        self.matched += 1
        if self.watchdog:
            self.watchdog.kick(f"{self.name} matched #{self.matched}")

    @property
    def pending(self) -> int:
        return len(self.expected)

    def check_empty(self) -> None:
        if self.expected:
            head = ", ".join(self.fmt(x) for x in list(self.expected)[:4])
            raise ScoreboardError(
                f"{self.name}: {len(self.expected)} expected items never arrived "
                f"(after {self.matched} matched; first: {head}; seed {self.seed})")


class KeyedScoreboard:
    """One in-order queue per key, e.g. ``(source, destination)`` of a crossbar."""

    def __init__(self, name: str = "scoreboard", seed: int | None = None,
                 fmt: Callable[[Any], str] = _fmt, watchdog=None):
        self.name = name
        self.seed = seed
        self.fmt = fmt
        self.watchdog = watchdog
        self.queues: dict[Hashable, deque] = {}
        self.matched = 0
        self.matched_by_key: dict[Hashable, int] = {}

    def expect(self, key: Hashable, item: Any) -> None:
        self.queues.setdefault(key, deque()).append(item)

    def observe(self, key: Hashable, item: Any) -> None:
        q = self.queues.get(key)
        n = self.matched_by_key.get(key, 0)
        if not q:
            raise ScoreboardError(
                f"{self.name}[{key}]: unexpected item #{n}: {self.fmt(item)} "
                f"(nothing expected for this key; seed {self.seed})")
        want = q.popleft()
        if want != item:
            raise ScoreboardError(
                f"{self.name}[{key}]: item #{n} mismatch: got {self.fmt(item)}, "
                f"expected {self.fmt(want)} (seed {self.seed})")
        self.matched += 1
        self.matched_by_key[key] = n + 1
        if self.watchdog:
            self.watchdog.kick(f"{self.name}[{key}] matched #{n + 1}")

    @property
    def pending(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def check_empty(self) -> None:
        left = {k: len(q) for k, q in self.queues.items() if q}
        if left:
            shown = ", ".join(f"{k}: {n}" for k, n in list(left.items())[:8])
            raise ScoreboardError(
                f"{self.name}: {sum(left.values())} expected items never arrived "
                f"({shown}; {self.matched} matched; seed {self.seed})")
