"""Text templates written beside generated Verilog (FuseSoC testbenches)."""
