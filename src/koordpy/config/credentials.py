"""The ``credentials`` section every long-running component's configuration has (extender, manager, agent).

.. code-block:: yaml

    credentials:
      refusedNotReadySeconds: 120

How the credentials themselves are kept fresh is not configured here: a token file is re-read at least
every minute and at once after a 401, an exec plugin is re-run when its credential expires or after a
401 (see ``koordpy.kube.credentials``). This section says when refused credentials make the component
not ready.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CredentialsSettings"]


class CredentialsSettings(BaseModel):
    """When credentials that the API server keeps refusing turn the component not ready."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, use_attribute_docstrings=True)

    refused_not_ready_seconds: float = Field(
        120.0, alias="refusedNotReadySeconds", strict=True, allow_inf_nan=False, ge=1, le=86_400
    )
    """``/readyz`` fails once the API server has answered the newest credentials with 401 for this many
    seconds and accepted no request since (1 s to 1 day). The default outlasts one re-read of the token
    file (at most 60 s apart), so a token that kubelet has rotated but this process has not re-read yet
    never turns it not ready."""
