"""One module per ``fusionfabric`` subcommand (see :mod:`sim.cli`)."""
