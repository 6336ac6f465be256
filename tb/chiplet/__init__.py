"""cocotb testbenches of the chiplet link (two endpoints through a fault channel)."""
