"""cocotb modules and a harness for bench/sim_speed.py (simulated cycles per second)."""
