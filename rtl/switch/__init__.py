"""The crossbar switch: one component per microarchitecture (``VoqSwitch``, ``FifoSwitch``,
``PipelinedSwitch``, ``CrosspointSwitch``) over shared parts (``SwitchBase``, ``Ingress``,
``OutputSide``), their queues, the iSLIP allocator and the group table; ``top.Switch`` is
the factory of the ``switch`` block.

See docs/switch.md for the cycle-level contract that the numpy model follows.
"""
