"""Adapters that read the node: cgroupfs (v1 and v2) and procfs."""
