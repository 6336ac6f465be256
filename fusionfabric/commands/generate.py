"""``fusionfabric generate``: Verilog-2005 and a JSON port map for one block.

The Verilog starts with a `` `timescale`` line (``--timescale``, default ``1ns/1ps``;
``--timescale none`` writes none). The port map (``FILE.ports.json``) lists every port with
its direction and width, and the bit fields (offset, width, enum values) of every port whose
declared shape is a data layout (:func:`fusionfabric.rtl.export.port_map`). With
``--fusesoc`` a FuseSoC core is written beside them (:mod:`fusionfabric.fusesoc`), plus a
self-checking Icarus testbench for the blocks that have one. With ``--split`` the fabric's
Verilog holds one module per distinct endpoint path, one for the switch and one for its
reduction units (:mod:`fusionfabric.rtl.fabric.split`), and a switch's with ``reduce=true``
one module for its reduction units besides the switch
(:func:`fusionfabric.rtl.switch.common.split_switch_verilog`).
"""

from __future__ import annotations

import json
import sys

from fusionfabric.cli import CliError

NAME = "generate"
HELP = "write the Verilog of one block (and its JSON port map)"


def add_arguments(p):
    p.add_argument("block", nargs="?", help="block name (see --list)")
    p.add_argument("--list", action="store_true", help="list every block with its parameters")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a parameter (repeatable)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="Verilog file to write (default: stdout); the port map goes to "
                        "FILE with suffix .ports.json")
    p.add_argument("--name", default=None, metavar="TOP",
                   help="top module name (default: the block name, '-' replaced by '_')")
    p.add_argument("--fusesoc", action="store_true",
                   help="also write a FuseSoC CAPI2 core FILE with suffix .core (needs -o), "
                        "with targets default and lint, and sim for blocks with a testbench "
                        "(bist-gen, bist-check: FILE_tb.v beside it)")
    p.add_argument("--split", action="store_true",
                   help="fabric: one module per distinct endpoint path (lanes, kind), one "
                        "for the switch and one for its reduction units, instantiated by a "
                        "top with the same ports (docs/fabric.md, 'Split Verilog'); switch "
                        "with reduce=true: its reduction units as one module")
    p.add_argument("--timescale", default="1ns/1ps", metavar="UNIT/PREC",
                   help="the `timescale line the Verilog starts with (default 1ns/1ps; "
                        "units 1, 10 or 100 of s, ms, us, ns, ps, fs; 'none': no line)")


def list_blocks(out=None):
    from fusionfabric.rtl.blocks import all_blocks

    out = out or sys.stdout

    for block in all_blocks().values():
        print(f"{block.name}: {block.doc}", file=out)
        for p in block.params:
            choices = f" {{{', '.join(map(str, p.choices))}}}" if p.choices else ""
            print(f"    {p.name} ({p.type.__name__}, default {p.default!r}){choices}: {p.doc}",
                  file=out)


def run(args):
    from fusionfabric.rtl.blocks import get_block, parse_sets
    from fusionfabric.rtl.export import check_timescale, port_map, to_verilog

    if args.list:
        list_blocks()
        return 0
    if not args.block:
        raise CliError("generate: give a BLOCK or --list")
    timescale = None
    if args.timescale.strip().lower() != "none":
        try:
            timescale = check_timescale(args.timescale)
        except ValueError as exc:
            raise CliError(f"--timescale: {exc}") from None
    block = get_block(args.block)
    if args.split and block.name not in ("fabric", "switch"):
        raise CliError(f"--split: only the fabric and the switch (with reduce=true) have a "
                       f"split form, not {block.name!r}")
    params = block.resolve(parse_sets(block, args.set))
    if args.split and block.name == "switch" and not params["reduce"]:
        raise CliError("--split: the switch has a split form only with reduce=true "
                       "(its reduction units are the separate module), not reduce=false")
    top = args.name or block.name.replace("-", "_")
    if not top.isidentifier():
        raise CliError(f"--name {top!r} is not a valid Verilog identifier")
    if args.fusesoc and not args.output:
        raise CliError("--fusesoc needs -o FILE (the .core is written beside it)")
    if args.output:
        from fusionfabric.commands._common import check_output
        out = check_output(args.output, "-o")
        check_output(out.with_suffix(".ports.json"), "-o (port map)")
        if args.fusesoc:
            from fusionfabric.fusesoc import has_testbench, testbench_path
            check_output(out.with_suffix(".core"), "-o (FuseSoC core)")
            if has_testbench(block.name):
                check_output(testbench_path(out), "-o (FuseSoC testbench)")
    component = block.build(**params)
    if args.split:
        from fusionfabric.rtl.fabric.split import split_design_verilog
        text = split_design_verilog(component, top, timescale=timescale,
                                    progress=lambda name: print(f"converting {name}",
                                                                file=sys.stderr))
    else:
        text = to_verilog(component, top, timescale=timescale)
    ports = port_map(component, top)
    ports.update(block=block.name, params=params, timescale=timescale)
    if args.output:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        out.with_suffix(".ports.json").write_text(json.dumps(ports, indent=2) + "\n")
        print(f"wrote {out} and {out.with_suffix('.ports.json')}", file=sys.stderr)
        if args.fusesoc:
            from fusionfabric.fusesoc import core_text, testbench_text
            core = out.with_suffix(".core")
            tb_name = None
            if has_testbench(block.name):
                tb = testbench_path(out)
                tb.write_text(testbench_text(block.name, params, ports,
                                             timescale=timescale or "1ns/1ps"))
                tb_name = tb.name
                print(f"wrote {tb}", file=sys.stderr)
            core.write_text(core_text(block.name, params, out.name, top, doc=block.doc,
                                      name=args.name and top, testbench=tb_name))
            print(f"wrote {core}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
