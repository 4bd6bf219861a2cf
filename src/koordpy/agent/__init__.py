"""The node agent: usage collection, NodeMetric reporting and precise waterline QoS.

``koordpy.agent.policy`` is pure (no clock, no I/O); ``sources`` read cgroupfs/procfs,
``actuators`` hold the one cgroup writer and the evictor, ``reporter`` and ``loop`` talk to the API.
"""
