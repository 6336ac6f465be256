"""One module per ``fusionfabric`` subcommand (see :mod:`fusionfabric.cli`)."""
