"""cocotb testbench of the board slice (docs/board.md)."""
