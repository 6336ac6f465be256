"""The verification kit every testbench uses.

- :mod:`.runner`: Amaranth → Verilog → cocotb runner (Icarus or Verilator), hashed build
  dirs, file locks, JUnit XML per test, failures with message and seed.
- :mod:`.stream`: :class:`StreamSource` / :class:`StreamSink` for ``lib.stream`` ports
  bound by name, with random idle and backpressure.
- :mod:`.amaranth_stream`: :class:`StreamSender` / :class:`StreamReceiver` and
  :func:`run_stream` for unit tests in the Amaranth simulator, with seeded random idle and
  backpressure.
- :mod:`.scoreboard`: in-order and keyed scoreboards with ``check_empty``.
- :mod:`.watchdog`: fails a test that makes no progress.
- :mod:`.coverage`: cocotb-coverage cover points, export and merge.
- :mod:`.env`: parameters, arguments and the seed handed over by the runner.

Only the runner and :mod:`.amaranth_stream` are imported by pytest tests; the rest import
cocotb and are used inside the simulator.
"""
