"""Every CRD the chart renders is accepted by the API emulator, which applies kube-apiserver's CRD rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helm_render import of_kind, render, render_scenario

from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.errors import ApiError
from koordpy.kube.resources import CUSTOMRESOURCEDEFINITIONS
from koordpy_testkit.apiserver import ApiServerEmulator, ClusterState, default_resources, running_apiserver

BUILT_IN = ("", "apiextensions.k8s.io", "policy", "coordination.k8s.io")


async def apply(crds: list[dict[str, Any]]) -> ApiServerEmulator:
    """POST each CRD to a fresh emulator (one without koordpy's kinds pre-registered) over HTTP."""
    state = ClusterState(infos=[i for i in default_resources() if i.ref.group in BUILT_IN])
    async with running_apiserver(state=state) as api, ApiClient(ConnectionInfo.for_url(api.url, token="t")) as client:
        for crd in crds:
            created = await client.create(CUSTOMRESOURCEDEFINITIONS, crd)
            assert created["metadata"]["name"] == crd["metadata"]["name"]
        return api


async def test_every_rendered_crd_is_accepted_and_served(scenario: str) -> None:
    crds = of_kind(render_scenario(scenario), "CustomResourceDefinition")
    api = await apply(crds)
    served = {f"{plural}.{group}" for group, plural in api.state.infos}
    assert {c["metadata"]["name"] for c in crds} <= served


async def test_without_keep_and_without_the_approval_the_podgroup_crd_is_refused() -> None:
    crds = of_kind(render("--set", "crds.keep=false"), "CustomResourceDefinition")
    await apply(crds)  # the approval annotation is there even without helm's keep annotation
    (podgroup,) = [c for c in crds if c["metadata"]["name"] == "podgroups.scheduling.sigs.k8s.io"]
    unapproved = copy.deepcopy(podgroup)
    del unapproved["metadata"]["annotations"]
    with pytest.raises(ApiError) as caught:
        await apply([unapproved])
    assert caught.value.status == 422
    (cause,) = caught.value.details["causes"]
    assert cause["field"] == "metadata.annotations[api-approved.kubernetes.io]"
    assert "protected groups must have approval annotation" in cause["message"]
