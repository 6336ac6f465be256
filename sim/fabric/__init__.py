"""The cycle-level fabric model: switch + links, traffic, statistics, physical mapping.

- :mod:`fusionfabric.sim.fabric.config`: typed run configuration, TOML files, ``--set`` overrides;
- :mod:`fusionfabric.sim.fabric.kernel`: the cycle rules of docs/switch.md (numba-compiled
  scalar loops);
- :mod:`fusionfabric.sim.fabric.engine`: :class:`~sim.fabric.engine.Fabric`, the batched state;
- :mod:`fusionfabric.sim.fabric.traffic`: seeded traffic generators and trace replay;
- :mod:`fusionfabric.sim.fabric.stats`, :mod:`fusionfabric.sim.fabric.run`: BookSim-style sweeps and statistics;
- :mod:`fusionfabric.sim.fabric.phys`: flits per cycle to bytes per second (NVLink 6 figures);
- :mod:`fusionfabric.sim.fabric.collective`: all-reduce and all-to-all, ring or through the switch.

See docs/model.md.
"""
