"""Checks every command makes before it starts work: output paths and run sizes.

Output paths (:func:`check_output`): every file or directory a command will write is checked
before any simulation, tool run or generation starts, so that a long run never ends in an
``OSError`` at the last step. A bad path is a :class:`~fusionfabric.cli.CliError` (one line
naming the option and the path, exit status 2):

* a path whose parent chain runs through an existing file (``out.txt/x.json``);
* a directory that exists but is not writable, or a missing one whose nearest existing
  ancestor is not writable (missing directories are created when the file is written);
* a file output that names an existing directory, or an existing file that is read-only;
* a plot whose suffix matplotlib cannot write (its list:
  ``matplotlib.figure.Figure().canvas.get_supported_filetypes()``; no suffix is refused too,
  since matplotlib would then write PNG under a name without one).

Run sizes (:func:`say_estimate`): a run whose estimated wall time exceeds
:data:`SAY_ESTIMATE_S` gets one line on stderr with the estimate before it starts. The
estimates divide the run's size by a measured rate; each command documents its rate and
where it was measured, and refuses sizes above a documented hard limit (exit status 2).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

__all__ = ["check_output", "plot_suffixes", "write_text", "say_estimate", "format_seconds",
           "SAY_ESTIMATE_S"]

#: Runs estimated to take at least this long (seconds) print their estimate first.
SAY_ESTIMATE_S = 10.0


def plot_suffixes() -> tuple[str, ...]:
    """The file suffixes matplotlib's default canvas can write (``"png"``, ``"svg"``, ...)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return tuple(sorted(Figure().canvas.get_supported_filetypes()))


def _nearest_existing(p: Path) -> Path:
    q = p
    while not q.exists() and q != q.parent:
        q = q.parent
    return q


def _can_create_in(d: Path) -> bool:
    """Whether a file can be created in directory ``d`` (tried, then removed: permission
    bits alone say yes to root on a read-only file system)."""
    try:
        with tempfile.TemporaryFile(dir=d):
            return True
    except OSError:
        return False


def _can_append(f: Path) -> bool:
    """Whether the existing file ``f`` opens for writing (append mode: nothing changes)."""
    try:
        with open(f, "ab"):
            return True
    except OSError:
        return False


def check_output(path, option: str, kind: str = "file") -> Path:
    """Check that ``path`` (given as ``option``) can be written; return it as a Path.

    ``kind``: ``"file"`` (a file, its missing parents created on write), ``"dir"`` (a
    directory, created if missing) or ``"plot"`` (a file with a suffix matplotlib writes).
    Raises :class:`~fusionfabric.cli.CliError` with one line naming the option and path.
    """
    from fusionfabric.cli import CliError

    if kind not in ("file", "dir", "plot"):
        raise ValueError(f"kind={kind!r} is not file, dir or plot")
    text = str(path)
    if not text.strip():
        raise CliError(f"{option} is empty: give a path")
    p = Path(text).expanduser()
    if kind == "plot":
        suffix = p.suffix.lower().lstrip(".")
        ok = plot_suffixes()
        if suffix not in ok:
            raise CliError(f"{option} {text}: matplotlib cannot write "
                           f"{'.' + suffix if suffix else 'a file without a suffix'} "
                           f"(it writes: {', '.join(ok)})")
    absolute = p.absolute()
    if absolute.exists():
        if kind == "dir":
            if not absolute.is_dir():
                raise CliError(f"{option} {text} is a file, not a directory")
            if not _can_create_in(absolute):
                raise CliError(f"{option} {text}: directory is not writable")
        elif absolute.is_dir():
            raise CliError(f"{option} {text} is a directory, not a file")
        elif not _can_append(absolute):
            raise CliError(f"{option} {text}: the file is not writable")
        return p
    anc = _nearest_existing(absolute)
    if not anc.is_dir():
        raise CliError(f"{option} {text}: {anc} is a file, not a directory")
    if not _can_create_in(anc):
        raise CliError(f"{option} {text}: directory {anc} is not writable")
    return p


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, creating its missing parent directories."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def format_seconds(s: float) -> str:
    """``"40 s"``, ``"12 min"``, ``"3.1 h"``, ``"2.4 days"``, ``"1.2e+04 years"``."""
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    if s < 365 * 86400:
        return f"{s / 86400:.1f} days"
    return f"{s / (365.25 * 86400):.2g} years"


def say_estimate(command: str, seconds: float, what: str) -> None:
    """One line on stderr, ``"<command>: estimated run time about X (<what>)"``, if the
    estimate is at least :data:`SAY_ESTIMATE_S`."""
    if seconds >= SAY_ESTIMATE_S:
        print(f"fusionfabric {command}: estimated run time about {format_seconds(seconds)} "
              f"({what})", file=sys.stderr, flush=True)
