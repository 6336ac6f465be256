"""The cycle-level fabric model: switch + links, traffic, statistics, physical mapping.

- :mod:`sim.fabric.config`: typed run configuration, TOML files, ``--set`` overrides;
- :mod:`sim.fabric.kernel` / :mod:`sim.fabric.vkernel`: the cycle rules of docs/switch.md
  (numba-compiled scalar loops, or numpy vectorized over batch x ports);
- :mod:`sim.fabric.engine`: :class:`~sim.fabric.engine.Fabric`, the batched state;
- :mod:`sim.fabric.traffic`: seeded traffic generators and trace replay;
- :mod:`sim.fabric.stats`, :mod:`sim.fabric.run`: BookSim-style sweeps and statistics;
- :mod:`sim.fabric.phys`: flits per cycle to bytes per second (NVLink 6 figures);
- :mod:`sim.fabric.collective`: all-reduce and all-to-all, ring or through the switch.

See docs/model.md.
"""
