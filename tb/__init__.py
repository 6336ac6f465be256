"""cocotb testbenches; ``tb.common`` is the shared verification kit."""
