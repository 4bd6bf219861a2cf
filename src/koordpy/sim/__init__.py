"""``koordpy simulate``: a discrete-event cluster simulator that runs the services' own decision code.

Adapter layer: an in-memory cluster that applies decisions; no I/O inside the engine (the CLI
reads the scenario and writes the report). Placement goes through ``ClusterState`` and the
plugins from ``build_plugins``; node QoS through the agent's ``plan``/``naive_plan``.
"""
