"""Self-checking Verilog testbenches for the switch-port BIST blocks (``bist-gen``,
``bist-check``), run by the ``sim`` target of a generated FuseSoC core (Icarus).

Each testbench holds its own Verilog reference of the BIST traffic, written from the
format (``docs/bist.md``, :mod:`fusionfabric.sim.bist` module docstring), not from the RTL:
the packet LFSR (PRBS31, x^31 + x^28 + 1, advanced 31 steps per packet, seeded by
:func:`fusionfabric.formats.bist.seed_state`), destination and length of each packet, the
per-destination sequence numbers, and the data word (the 40-bit signature ``beat, seq,
dest, src`` and the LFSR filler above it). Field positions in the stream payload come from
the block's port map (``.ports.json``), so a wrong port map fails the run too.

``bist-gen``
    enables the generator with a budget of ``PACKETS`` packets at load 200/256 under random
    backpressure, compares every accepted flit, field by field, with the reference, then
    checks ``o_done``, the counters and every ``o_next_seq``, and that no flit follows.
``bist-check``
    drives the reference traffic from source ``src`` (a port other than the checker's when
    there is one) to the checker's port with random gaps, under the checker's own
    backpressure (``i_stall`` = 40), checks that no error is counted, then sends one packet
    with a flipped data bit and checks that exactly one data error is counted.

Both print ``PASS`` and ``$finish``, or stop with ``$fatal`` (exit status non-zero) and
the first mismatch. The clock period is 10 time units; the run takes well under a second
of Icarus time at the default parameters.
"""

from __future__ import annotations

from typing import Any

from fusionfabric.formats.bist import (BIST_SEQ_BITS, FILL_SALT, FILL_WARMUP, LFSR_ORDER,
                                      LFSR_TAP, SIG_BITS, seed_state)
from fusionfabric.formats.switch import Kind

__all__ = ["BLOCKS", "PACKETS", "testbench"]

#: The blocks that have a testbench here.
BLOCKS = ("bist-gen", "bist-check")
#: Packets each testbench sends (before the planted fault of ``bist-check``).
PACKETS = 60


def _port(ports: dict[str, Any], name: str) -> dict[str, Any]:
    for p in ports["ports"]:
        if p["name"] == name:
            return p
    raise ValueError(f"port map of {ports.get('block')!r} has no port {name!r}")


def _field_params(port: dict[str, Any]) -> str:
    """``localparam F_<field> = offset, W_<field> = width;`` for every field of ``port``."""
    fields = {f["name"]: f for f in port.get("fields", [])}
    need = ("data", "first", "last", "kind", "dest", "src", "chunk")
    missing = [n for n in need if n not in fields]
    if missing:
        raise ValueError(f"port {port['name']} lists no field {', '.join(missing)}")
    return "\n".join(f"  localparam integer F_{n.upper()} = {fields[n]['offset']}, "
                     f"W_{n.upper()} = {fields[n]['width']};" for n in need)


def _instance(ports: dict[str, Any]) -> tuple[str, str]:
    """Declarations (``reg`` for inputs, ``wire`` for outputs, named ``p_<port>``) and the
    instance of the top module with every port connected."""
    decl, conns = [], []
    for p in ports["ports"]:
        if p["name"] in ("clk", "rst"):
            continue
        rng = f"[{p['width'] - 1}:0] " if p["width"] > 1 else ""
        kind = "reg " if p["direction"] == "input" else "wire"
        init = " = 0" if p["direction"] == "input" else ""
        decl.append(f"  {kind} {rng}p_{p['name']}{init};")
    for p in ports["ports"]:
        sig = p["name"] if p["name"] in ("clk", "rst") else f"p_{p['name']}"
        conns.append(f"    .{p['name']}({sig})")
    return "\n".join(decl), f"  {ports['top']} dut(\n" + ",\n".join(conns) + "\n  );"


_REFERENCE = """
  // ---- reference of the BIST traffic (from the format, not from the RTL) ----
  localparam [30:0] FILL_SALT = 31'd{fill_salt};
  localparam integer FILL_WARMUP = {fill_warmup};
  reg [30:0] pkt_state;
  reg [{seq_bits}-1:0] next_seq [0:NP-1];
  reg [7:0] e_dest;
  reg [{seq_bits}-1:0] e_seq;
  reg [31:0] e_len, e_beat;
  reg e_open;                 // a packet is under way (e_beat < e_len)
  integer e_packets, e_flits, k;

  function [30:0] lfsr_adv(input [30:0] s0, input integer n);
    integer i;
    reg [30:0] s;
    begin
      s = s0;
      for (i = 0; i < n; i = i + 1) s = {{s[29:0], s[{lfsr_hi}] ^ s[{lfsr_tap}]}};
      lfsr_adv = s;
    end
  endfunction

  function [DW-1:0] make_data(input [7:0] src, input [7:0] dest,
                              input [{seq_bits}-1:0] seq, input [7:0] beat);
    reg [{sig_bits}-1:0] sig;
    reg [30:0] s;
    reg b;
    integer i;
    reg [DW-1:0] w;
    begin
      sig = {{src, dest, seq, beat}};
      s = sig[30:0] ^ (sig >> 31) ^ FILL_SALT;
      for (i = 0; i < FILL_WARMUP; i = i + 1) s = {{s[29:0], s[{lfsr_hi}] ^ s[{lfsr_tap}]}};
      w = 0;
      w[{sig_bits}-1:0] = sig;
      for (i = {sig_bits}; i < DW; i = i + 1) begin
        b = s[{lfsr_hi}] ^ s[{lfsr_tap}];
        w[i] = b;
        s = {{s[29:0], b}};
      end
      make_data = w;
    end
  endfunction

  task ref_reset;
    begin
      pkt_state = SEED0;
      for (k = 0; k < NP; k = k + 1) next_seq[k] = 0;
      e_open = 0;
      e_packets = 0;
      e_flits = 0;
    end
  endtask

  // start the next packet if none is under way (destination, length, sequence number)
  task ref_open;
    reg [31:0] d;
    begin
      if (!e_open) begin
        pkt_state = lfsr_adv(pkt_state, 31);
        if (PERM) d = (SRC + OFFSET) % NP;
        else d = ({{16'd0, pkt_state[15:0]}} * NP) >> 16;
        e_dest = d[7:0];
        e_len = 1 + (({{24'd0, pkt_state[23:16]}} * MAX_LEN) >> 8);
        e_seq = next_seq[e_dest];
        next_seq[e_dest] = e_seq + 1;
        e_beat = 0;
        e_open = 1;
        e_packets = e_packets + 1;
      end
    end
  endtask

  // the reference flit (the current beat of the open packet), packed at the port map's offsets
  function [PW-1:0] ref_flit(input dummy);
    reg [PW-1:0] f;
    begin
      f = 0;
      f[F_DATA +: W_DATA] = make_data(SRC, e_dest, e_seq, e_beat[7:0]);
      f[F_FIRST +: W_FIRST] = (e_beat == 0);
      f[F_LAST +: W_LAST] = (e_beat == e_len - 1);
      f[F_KIND +: W_KIND] = KIND_UNICAST;
      f[F_DEST +: W_DEST] = e_dest;
      f[F_SRC +: W_SRC] = SRC;
      f[F_CHUNK +: W_CHUNK] = 0;
      ref_flit = f;
    end
  endfunction

  task ref_next;
    begin
      e_beat = e_beat + 1;
      e_flits = e_flits + 1;
      if (e_beat == e_len) e_open = 0;
    end
  endtask

  // backpressure / gap draws: a 32-bit LCG (Numerical Recipes), the same on every simulator
  reg [31:0] rnd = 32'd{rnd_seed};
  task draw;
    begin
      rnd = rnd * 32'd1664525 + 32'd1013904223;
    end
  endtask

  reg clk = 0, rst = 1;
  always #5 clk = ~clk;
  integer cycle = 0;
  always @(posedge clk) cycle <= cycle + 1;
"""


def _params(dw: int, np_: int, src: int, max_len: int, perm: bool, offset: int,
            seed0: int, payload_width: int) -> str:
    return "\n".join([
        f"  localparam integer DW = {dw}, NP = {np_}, SRC = {src}, MAX_LEN = {max_len};",
        f"  localparam integer PERM = {int(perm)}, OFFSET = {offset}, PACKETS = {PACKETS};",
        f"  localparam [30:0] SEED0 = 31'd{seed0};",
        f"  localparam integer PW = {payload_width};",
        f"  localparam [1:0] KIND_UNICAST = {int(Kind.UNICAST)};",
    ])


def _reference(rnd_seed: int) -> str:
    return _REFERENCE.format(fill_salt=FILL_SALT, fill_warmup=FILL_WARMUP,
                             seq_bits=BIST_SEQ_BITS, sig_bits=SIG_BITS,
                             lfsr_hi=LFSR_ORDER - 1, lfsr_tap=LFSR_TAP - 1,
                             rnd_seed=rnd_seed)


def _fail(msg: str, *args: str) -> str:
    extra = "".join(f", {a}" for a in args)
    return f'$fatal(1, "FAIL: {msg}"{extra});'


def _gen_tb(params: dict[str, Any], ports: dict[str, Any]) -> str:
    payload = _port(ports, "o_flit__payload")
    np_ = params["n_ports"]
    decl, inst = _instance(ports)
    seq_checks = "\n".join(
        f"    if (p_o_next_seq__{d} !== next_seq[{d}]) "
        + _fail(f"o_next_seq[{d}] = %0d, reference %0d", f"p_o_next_seq__{d}",
                f"next_seq[{d}]")
        for d in range(np_))
    return f"""module ff_tb;
{_params(params["data_width"], np_, params["port"], params["max_len"],
         params["pattern"] == "permutation", params["offset"],
         seed_state(params["seed"], params["port"], 0), payload["width"])}
{_field_params(payload)}
{decl}
{inst}
{_reference(12345)}
  reg hs = 0;
  reg [PW-1:0] got;
  reg [PW-1:0] want;
  always @(posedge clk) begin
    hs <= p_o_flit__valid & p_o_flit__ready;
    got <= p_o_flit__payload;
  end

  // compare each accepted flit (handshake at the posedge, checked at the next negedge)
  always @(negedge clk) if (!rst) begin
    if (hs) begin
      if (e_packets == PACKETS && !e_open)
        {_fail("flit after the budget of %0d packets", "PACKETS")}
      ref_open;
      want = ref_flit(0);
      if (got !== want)
        {_fail("flit %0d (packet %0d beat %0d): got %h, reference %h",
               "e_flits", "e_packets - 1", "e_beat", "got", "want")}
      ref_next;
    end
    draw;
    p_o_flit__ready = rnd[31:30] != 2'b00;    // ready 3/4 of the cycles
  end

  initial begin
    ref_reset;
    p_i_budget = PACKETS;
    p_i_load = 200;
    p_i_enable = 0;
    repeat (3) @(negedge clk);
    rst = 0;
    p_i_enable = 1;
    while (!p_o_done && cycle < 200000) @(negedge clk);
    if (!p_o_done) {_fail("o_done not set after %0d cycles", "cycle")}
    repeat (20) @(negedge clk);
    if (e_packets != PACKETS || e_open)
      {_fail("%0d packets seen (last open: %0d), budget %0d", "e_packets", "e_open", "PACKETS")}
    if (p_o_packets !== PACKETS) {_fail("o_packets = %0d, reference %0d", "p_o_packets", "PACKETS")}
    if (p_o_started !== PACKETS) {_fail("o_started = %0d, reference %0d", "p_o_started", "PACKETS")}
    if (p_o_flits !== e_flits) {_fail("o_flits = %0d, reference %0d", "p_o_flits", "e_flits")}
    if (p_o_flit__valid) {_fail("o_flit.valid high after o_done")}
{seq_checks}
    $display("PASS: bist-gen, %0d packets, %0d flits, %0d cycles", e_packets, e_flits, cycle);
    $finish;
  end
endmodule
"""


def _check_tb(params: dict[str, Any], ports: dict[str, Any]) -> str:
    payload = _port(ports, "i_flit__payload")
    np_, port = params["n_ports"], params["port"]
    src = (port + 1) % np_
    offset = (port - src) % np_
    flip = params["data_width"] - 1
    return f"""module ff_tb;
{_params(params["data_width"], np_, src, 4, True, offset, seed_state(1, src, 0),
         payload["width"])}
{_field_params(payload)}
{_instance(ports)[0]}
{_instance(ports)[1]}
{_reference(54321)}
  // the source: the reference flit, with random gaps; a flit offered stays until accepted
  reg hs = 0;
  reg fault = 0;               // flip data bit {flip} of the offered flit
  reg sending = 0;
  integer limit = PACKETS;
  always @(posedge clk) hs <= p_i_flit__valid & p_i_flit__ready;
  always @(negedge clk) if (!rst) begin
    if (hs) begin              // the offered flit was taken at the last posedge
      ref_next;
      fault = 0;
      p_i_flit__valid = 0;
    end
    draw;
    if (!p_i_flit__valid && sending && (e_open || e_packets < limit)
        && rnd[31:29] != 3'b000) begin          // offer the next flit in 7/8 of the cycles
      ref_open;
      p_i_flit__payload = ref_flit(0);
      p_i_flit__payload[F_DATA + {flip}] = p_i_flit__payload[F_DATA + {flip}] ^ fault;
      p_i_flit__valid = 1;
    end
  end

  task expect_counts(input integer data_errors);
    begin
      if (p_o_packets !== e_packets)
        {_fail("o_packets = %0d, reference %0d", "p_o_packets", "e_packets")}
      if (p_o_flits !== e_flits) {_fail("o_flits = %0d, reference %0d", "p_o_flits", "e_flits")}
      if (p_o_seq_errors !== 0) {_fail("o_seq_errors = %0d", "p_o_seq_errors")}
      if (p_o_framing_errors !== 0) {_fail("o_framing_errors = %0d", "p_o_framing_errors")}
      if (p_o_data_errors !== data_errors)
        {_fail("o_data_errors = %0d, expected %0d", "p_o_data_errors", "data_errors")}
      if (p_o_expected__{src} !== next_seq[{port}])
        {_fail("o_expected[{src}] = %0d, reference %0d", f"p_o_expected__{src}",
               f"next_seq[{port}]")}
    end
  endtask

  task run_to(input integer packets);
    begin
      limit = packets;
      while ((e_packets < limit || e_open) && cycle < 200000) @(negedge clk);
      if (e_packets < limit || e_open) {_fail("stuck at packet %0d beat %0d", "e_packets", "e_beat")}
      repeat (10) @(negedge clk);
    end
  endtask

  initial begin
    ref_reset;
    p_i_stall = 40;
    repeat (3) @(negedge clk);
    rst = 0;
    sending = 1;
    run_to(PACKETS);
    expect_counts(0);
    fault = 1;                 // the next packet's first flit carries a flipped bit
    run_to(PACKETS + 1);
    expect_counts(1);
    $display("PASS: bist-check, %0d packets, %0d flits, one planted data error, %0d cycles",
             e_packets, e_flits, cycle);
    $finish;
  end
endmodule
"""


def testbench(block: str, params: dict[str, Any], ports: dict[str, Any],
              timescale: str = "1ns/1ps") -> str:
    """The testbench (top module ``ff_tb``) of ``block`` built with ``params``, whose port
    map is ``ports`` (:func:`fusionfabric.rtl.export.port_map`)."""
    if block == "bist-gen":
        body = _gen_tb(params, ports)
    elif block == "bist-check":
        body = _check_tb(params, ports)
    else:
        raise ValueError(f"block {block!r} has no testbench (those with one: "
                         f"{', '.join(BLOCKS)})")
    return (f"`timescale {timescale}\n"
            f"// Self-checking testbench of {block} ({', '.join(f'{k}={v}' for k, v in params.items())}),\n"
            "// written by 'fusionfabric generate --fusesoc'; prints PASS or stops with $fatal.\n"
            + body)
