"""The crossbar switch: VOQ input queues, iSLIP allocator, group table, switch top.

See docs/switch.md for the cycle-level contract that the numpy model follows.
"""
