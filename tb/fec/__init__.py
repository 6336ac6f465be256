"""cocotb testbenches of the RS(544,514) encoder and decoder (rtl/fec)."""
