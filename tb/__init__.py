"""cocotb testbenches; ``fusionfabric.tb.common`` is the shared verification kit."""
