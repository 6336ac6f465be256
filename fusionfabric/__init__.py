"""fusionfabric: open RTL and a cycle-level model of a rack-scale AI interconnect.

The wheel installs one import namespace:

``fusionfabric.rtl``
    Amaranth components (synthesizable only).
``fusionfabric.sim``
    numpy golden models and the cycle-level model.
``fusionfabric.tb``
    cocotb testbenches and their shared kit (needs the ``[dev]`` extra).
``fusionfabric.formats``
    the bit layouts, codes and field widths shared by the RTL and the models.
``fusionfabric.cli``, ``fusionfabric.commands``
    the ``fusionfabric`` command line, one module per subcommand.
``fusionfabric.synth``, ``fusionfabric.lint``, ``fusionfabric.fusesoc``, ``fusionfabric.toolchain``, ``fusionfabric.paths``
    the tool flows and the build-directory logic.
"""
