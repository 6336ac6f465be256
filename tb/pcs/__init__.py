"""PCS testbenches: Amaranth-simulator harness (:mod:`.harness`) and cocotb tests."""
