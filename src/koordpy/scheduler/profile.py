"""The plugin set of the ``koordpy-scheduler`` profile, built from the configuration.

One composition root: the extender, ``explain`` and the simulator all call ``build_plugins``.
"""

from __future__ import annotations

from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.scheduler.framework.interfaces import Plugin
from koordpy.scheduler.plugins.loadaware.plugin import LoadAwarePlugin

__all__ = ["build_plugins"]


def build_plugins(config: SchedulerConfiguration) -> list[Plugin]:
    return [LoadAwarePlugin(config.load_aware)]
