"""cocotb testbenches of the AXI4-Stream wrappers (rtl/axis.py, docs/axis.md), driven by
cocotbext-axi's AxiStreamSource and AxiStreamSink."""
