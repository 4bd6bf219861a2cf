"""Test helpers shipped with koordpy: fluent builders for API objects and a fake clock.

Builders produce raw Kubernetes JSON dicts (what the API server would send), so tests exercise
the same conversion code as production.
"""

from koordpy_testkit.builders import NodeBuilder, NodeMetricBuilder, PodBuilder, make_node, make_pod
from koordpy_testkit.clock import FakeClock

__all__ = ["FakeClock", "NodeBuilder", "NodeMetricBuilder", "PodBuilder", "make_node", "make_pod"]
