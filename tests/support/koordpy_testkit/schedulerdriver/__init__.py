"""A kube-scheduler stand-in for system tests: drives an extender exactly as kube-scheduler does.

An adapter (aiohttp, wall clock); never imported by pure code. See ``docs/testing.md``.
"""

from koordpy_testkit.schedulerdriver.driver import Decision, DriverStats, SchedulerDriver
from koordpy_testkit.schedulerdriver.protocol import ExtenderConfig, ExtenderError

__all__ = ["Decision", "DriverStats", "ExtenderConfig", "ExtenderError", "SchedulerDriver"]
