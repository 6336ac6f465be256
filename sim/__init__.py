"""Pure-numpy golden models, the cycle-level fabric model, traffic, statistics and the CLI.

Golden models here never import amaranth or cocotb (the CLI and ``fusionfabric.sim.bitfields`` adapters
import amaranth lazily, only where a command needs the RTL).
"""
