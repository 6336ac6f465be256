"""cocotb testbenches of the shared primitives: scrambler/descrambler, CRC, PRBS."""
