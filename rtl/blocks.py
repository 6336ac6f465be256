"""The registry of generatable blocks.

A block is a named factory for one Amaranth component plus the typed parameters it takes.
Each ``rtl`` module that has blocks declares them in a module-level ``BLOCKS`` list::

    BLOCKS = [
        Block("scrambler", Scrambler, doc="Self-synchronizing scrambler",
              params=[Param("data_width", int, 64, "bits per cycle"), ...]),
    ]

The CLI (``fusionfabric generate``), the cocotb runner helper and the FPGA flow all build
components through this registry, so a parameter is defined once, here, in Python.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Param", "Block", "BlockError", "all_blocks", "get_block", "parse_sets", "disown_failed"]


class BlockError(ValueError):
    """A bad block name or parameter; the message names the bad value."""


_BOOL_TRUE = {"1", "true", "yes", "on"}
_BOOL_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Param:
    """One constructor parameter of a block.

    Parameters
    ----------
    name : str
        Keyword argument name of the component constructor.
    type : type
        ``int``, ``str``, ``bool`` or ``float``; ``parse`` converts text to it.
    default : object
        Value used when the parameter is not set.
    doc : str
        One line of help.
    choices : tuple, optional
        The allowed values, if the set is small and closed.
    """

    name: str
    type: type
    default: Any
    doc: str = ""
    choices: tuple | None = None

    def parse(self, text: str) -> Any:
        """Convert ``text`` to this parameter's type, or raise :class:`BlockError`."""
        try:
            if self.type is bool:
                low = text.strip().lower()
                if low in _BOOL_TRUE:
                    value = True
                elif low in _BOOL_FALSE:
                    value = False
                else:
                    raise ValueError
            elif self.type is int:
                value = int(text, 0)
            else:
                value = self.type(text)
        except ValueError:
            raise BlockError(
                f"parameter {self.name}={text!r} is not a valid {self.type.__name__}"
            ) from None
        self.check(value)
        return value

    def check(self, value: Any) -> None:
        """Raise :class:`BlockError` if ``value`` is not one of ``choices``."""
        if self.choices is not None and value not in self.choices:
            raise BlockError(
                f"parameter {self.name}={value!r} is not one of "
                f"{', '.join(map(str, self.choices))}"
            )


@dataclass(frozen=True)
class Block:
    """A generatable component: a name, a factory and its parameters.

    ``factory(**params)`` returns an ``amaranth.lib.wiring.Component``. It validates its
    parameters itself and raises ``ValueError``/``TypeError`` naming the bad value.
    """

    name: str
    factory: Callable[..., Any]
    params: tuple[Param, ...] = field(default_factory=tuple)
    doc: str = ""
    #: Overrides the whole-registry CI checks (lint, deterministic generation) use instead
    #: of the defaults, for a block whose defaults take minutes to build (the 8-endpoint
    #: fabric); the defaults themselves are checked by soak runs.
    ci_params: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))

    @property
    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        valid = ", ".join(p.name for p in self.params) or "none"
        raise BlockError(f"block {self.name} has no parameter {name!r} (valid: {valid})")

    def resolve(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """Defaults updated with ``overrides`` (already typed), each checked."""
        params = self.defaults
        for key, value in (overrides or {}).items():
            self.param(key).check(value)
            params[key] = value
        return params

    def build(self, **overrides):
        """Construct the component; constructor errors become :class:`BlockError`."""
        params = self.resolve(overrides)
        try:
            return self.factory(**params)
        except (ValueError, TypeError) as exc:
            disown_failed(exc)
            raise BlockError(f"block {self.name}: {exc}") from None


def disown_failed(exc: BaseException) -> None:
    """Mark the components a failed constructor left behind as used.

    Amaranth registers an ``Elaboratable`` before its ``__init__`` runs, so a constructor
    that raises leaves an object (and the subcomponents it had built) that nobody can use;
    when the garbage collector frees it, Amaranth warns ``UnusedElaboratable`` under
    whatever runs at that moment. The objects are the ``self`` of the frames the exception
    passed through, and what they hold.
    """
    from amaranth._unused import MustUse

    seen: set[int] = set()

    def mark(obj, depth: int = 0) -> None:
        if id(obj) in seen or depth > 4:
            return
        seen.add(id(obj))
        if isinstance(obj, MustUse):
            obj._MustUse__used = True
            for value in getattr(obj, "__dict__", {}).values():
                mark(value, depth + 1)
        elif isinstance(obj, (list, tuple)):
            for value in obj:
                mark(value, depth + 1)

    tb = exc.__traceback__
    while tb is not None:
        mark(tb.tb_frame.f_locals.get("self"))
        tb = tb.tb_next


def _discover() -> dict[str, Block]:
    from fusionfabric import rtl

    found: dict[str, Block] = {}
    for info in pkgutil.walk_packages(rtl.__path__, prefix="fusionfabric.rtl."):
        module = importlib.import_module(info.name)
        for block in getattr(module, "BLOCKS", ()):
            if block.name in found:
                raise RuntimeError(f"block {block.name!r} is declared twice ({info.name})")
            found[block.name] = block
    return dict(sorted(found.items()))


_CACHE: dict[str, Block] | None = None


def all_blocks() -> dict[str, Block]:
    """Every block declared by an ``rtl`` module, by name."""
    global _CACHE
    if _CACHE is None:
        _CACHE = _discover()
    return _CACHE


def get_block(name: str) -> Block:
    blocks = all_blocks()
    if name not in blocks:
        raise BlockError(f"unknown block {name!r} (known: {', '.join(blocks)})")
    return blocks[name]


def parse_sets(block: Block, sets: list[str]) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` strings into typed overrides for ``block``."""
    out: dict[str, Any] = {}
    for item in sets:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise BlockError(f"--set {item!r} is not KEY=VALUE")
        out[key.strip()] = block.param(key.strip()).parse(text)
    return out
