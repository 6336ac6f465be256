"""``fusionfabric board``: the fabric slice with its BIST on a real ECP5 board, up to a bitstream.

Exit status: 0 when the bitstream is written and the board clock is met; 1 when it is not
(the slice does not fit: the line names the resource that overflowed; a tool failed or
timed out; the clock is not met); 2 for a user error (an unknown board, a bad parameter or
output directory, a missing extra). docs/board.md is the spec.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fusionfabric.cli import CliError

NAME = "board"
HELP = "build the fabric slice (2 endpoints, BIST, LEDs, UART) for an ECP5 board: a bitstream"


def add_arguments(p):
    p.add_argument("--board", default="ulx3s-85f", help="board name (default ulx3s-85f; "
                   "--list shows them)")
    p.add_argument("--list", action="store_true", help="list the boards and exit")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a board-slice parameter (repeatable; see "
                        "'generate --list')")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="build directory (default build/board/<board>)")
    p.add_argument("--prepare-only", action="store_true",
                   help="write the design, constraints and scripts; run no tool")
    p.add_argument("--clock", type=float, default=None, metavar="MHZ",
                   help="run the slice from the FPGA's PLL at this frequency (the nearest "
                        "the PLL makes; default: the board's oscillator, no PLL)")
    p.add_argument("--seed", type=int, default=1, help="placement seed (default 1)")
    p.add_argument("--router", default="router1", metavar="NAME",
                   help="nextpnr's router: router1 (default) or router2 (the one that "
                        "routed the slice at --clock 40)")
    p.add_argument("--timeout", type=float, default=3600.0, metavar="SEC",
                   help="time limit of nextpnr (default 3600 s)")
    p.add_argument("--yosys-timeout", type=float, default=3600.0, metavar="SEC",
                   help="time limit of Yosys (default 3600 s)")


def run(args):
    from fusionfabric.board import BOARDS, BoardError, get_board

    if args.list:
        for b in BOARDS.values():
            print(f"{b.name:12s} {b.title}")
        return 0
    try:
        board = get_board(args.board)
    except BoardError as exc:
        raise CliError(f"board: {exc}") from None
    from fusionfabric.extras import require
    require("fpga", "board")
    for value, what in ((args.timeout, "--timeout"), (args.yosys_timeout, "--yosys-timeout")):
        if not value > 0:
            raise CliError(f"board: {what} {value!r} must be positive")
    from fusionfabric.board import check_router
    try:
        check_router(args.router)
    except BoardError as exc:
        raise CliError(f"board: {exc}") from None
    from fusionfabric.commands._common import check_output
    from fusionfabric.paths import build_root
    from fusionfabric.rtl.blocks import get_block, parse_sets

    out = Path(check_output(args.out, "--out", "dir")) if args.out is not None \
        else build_root() / "board" / board.name
    sets = parse_sets(get_block("board-slice"), args.set)
    from fusionfabric.board import (board_clock_mhz, board_params, build_board, make_slice,
                                    pll_settings, prepare_board)
    pll = None
    if args.clock is not None:
        try:
            pll = pll_settings(board_clock_mhz(board), args.clock)
        except BoardError as exc:
            raise CliError(f"board: {exc}") from None
        print(f"board {board.name}: PLL {pll.input_mhz:g} MHz / {pll.clki_div} * "
              f"{pll.clkfb_div} = {pll.output_mhz:g} MHz (VCO {pll.vco_mhz:g} MHz)")
    core = make_slice(board, sets, pll)  # a bad parameter: BlockError, exit 2
    if args.prepare_only:
        prepare_board(board, core, out, "fusionfabric_board", pll)
        print(f"board {board.name}: design, constraints and scripts in {out}")
        return 0
    from fusionfabric.synth import SynthError, check_tools
    try:
        check_tools("ecp5")
    except SynthError as exc:
        raise CliError(str(exc)) from None
    # progress on stdout: stderr carries only the one line of a failure
    print(f"board {board.name}: building in {out} (Yosys, nextpnr and ecppack; "
          "about half an hour to an hour on a shared 2-core machine)", flush=True)
    try:
        r = build_board(board, core, out, params=board_params(board, sets, pll),
                        seed=args.seed, pll=pll, yosys_timeout=args.yosys_timeout,
                        pnr_timeout=args.timeout, router=args.router)
    except SynthError as exc:
        print(f"board {board.name}: {exc}", file=sys.stderr)
        return 1
    comb = f", {r.comb:,} of {r.comb_available:,} logic cells" if r.comb_available else ""
    fmax = f"Fmax {r.fmax_mhz} MHz (clock {r.freq_target_mhz:g} MHz)" \
        if r.fmax_mhz is not None else f"no Fmax (clock {r.freq_target_mhz:g} MHz)"
    pnr = f"nextpnr {r.seconds_pnr:.0f} s" if r.seconds_pnr else "nextpnr not run"
    print(f"board {board.name}: {r.lut4:,} LUT4, {r.ff:,} FF, {r.bram} DP16KD, "
          f"{r.lutram} DPR16X4{comb}; {fmax}; Yosys {r.seconds_yosys:.0f} s, {pnr}")
    if r.status != "ok":
        # one line: the status and its note (a no-fit names each resource over the FPGA)
        print(f"board {board.name}: {r.status}: {r.note}", file=sys.stderr)
        return 1
    print(f"board {board.name}: bitstream {out / 'fusionfabric_board.bit'} "
          f"({(out / 'fusionfabric_board.bit').stat().st_size:,} bytes)")
    return 0
