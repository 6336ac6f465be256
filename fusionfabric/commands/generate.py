"""``fusionfabric generate``: Verilog-2005 and a JSON port map for one block."""

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
                   help="also write a FuseSoC CAPI2 core FILE with suffix .core (needs -o)")


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
    from fusionfabric.rtl.export import port_map, to_verilog

    if args.list:
        list_blocks()
        return 0
    if not args.block:
        raise CliError("generate: give a BLOCK or --list")
    block = get_block(args.block)
    params = block.resolve(parse_sets(block, args.set))
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
            check_output(out.with_suffix(".core"), "-o (FuseSoC core)")
    component = block.build(**params)
    text = to_verilog(component, top)
    ports = port_map(component, top)
    ports.update(block=block.name, params=params)
    if args.output:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        out.with_suffix(".ports.json").write_text(json.dumps(ports, indent=2) + "\n")
        print(f"wrote {out} and {out.with_suffix('.ports.json')}", file=sys.stderr)
        if args.fusesoc:
            from fusionfabric.fusesoc import core_text
            core = out.with_suffix(".core")
            core.write_text(core_text(block.name, params, out.name, top, doc=block.doc,
                                      name=args.name and top))
            print(f"wrote {core}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
