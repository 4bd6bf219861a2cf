"""koordpy: co-location-grade scheduling and node QoS for any Kubernetes cluster.

Layers (checked by import-linter, see pyproject.toml):

* ``koordpy.model``: quantities, resource vectors, pod/node/metric views, the Clock protocol. Pure.
* ``koordpy.config``: pydantic settings with defaults and field-path validation. Pure.
* ``koordpy.scheduler.framework`` and ``koordpy.scheduler.plugins``: decisions as values. Pure.
* adapters (``koordpy.kube``, ``koordpy.scheduler.extender``, ``koordpy.runtime``, ...) do the I/O.
* ``koordpy.cli``: one command per deployable plus the offline tools.
"""

__version__ = "0.1.0"
