"""The ``fusionfabric`` command line.

Subcommands live one per module in :mod:`fusionfabric.commands`; each module defines ``NAME``,
``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``. Every bad parameter, unknown
block or malformed value ends with exit status 2 and one line naming it, no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

__all__ = ["CliError", "main"]


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage too; we do not)
        raise CliError(f"{self.prog}: {message}")


def _commands():
    import fusionfabric.commands as pkg

    mods = []
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"fusionfabric.commands.{info.name}")
        if hasattr(mod, "NAME") and hasattr(mod, "run"):
            mods.append(mod)
    return sorted(mods, key=lambda m: m.NAME)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fusionfabric", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _commands():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    from fusionfabric.extras import MissingExtra
    from fusionfabric.rtl.blocks import BlockError
    from fusionfabric.formats.bitfields import FieldError

    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help()
            return 2
        return int(args._run(args) or 0)
    except (CliError, BlockError, FieldError, MissingExtra) as exc:
        print(f"fusionfabric: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    # Under ``python -m fusionfabric.cli`` this file is ``__main__``, a second copy whose CliError the
    # commands do not raise; run the package module's main so user errors still exit 2.
    from fusionfabric.cli import main as _main

    sys.exit(_main())
