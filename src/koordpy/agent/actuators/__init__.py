"""Adapters that change the node or the cluster: the one cgroup writer and the evictor."""
