"""Chart tier fixtures; the helm helpers live in helm_render.py."""

from __future__ import annotations

import pytest
from helm_render import SCENARIOS


@pytest.fixture(params=SCENARIOS)
def scenario(request: pytest.FixtureRequest) -> str:
    """The defaults, then each charts/koordpy/ci/*-values.yaml file."""
    return str(request.param)
