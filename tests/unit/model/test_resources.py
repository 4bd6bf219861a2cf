import pytest

from koordpy.model.quantity import QuantityError
from koordpy.model.resources import parse_resource_list, pod_limits, pod_requests


def _c(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **extra: str) -> dict[str, object]:
    resources: dict[str, object] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


def test_sum_of_containers() -> None:
    spec = {"containers": [_c({"cpu": "500m", "memory": "1Gi"}), _c({"cpu": "1", "memory": "512Mi"})]}
    # cpu 500m + 1000m = 1500m; memory 1Gi + 512Mi = 1536Mi
    assert pod_requests(spec) == {"cpu": 1500, "memory": 1536 * 2**20}


def test_init_container_peak_wins_when_larger() -> None:
    spec = {"containers": [_c({"cpu": "1"})], "initContainers": [_c({"cpu": "3"}), _c({"cpu": "2"})]}
    # max(init peak 3000m, containers 1000m) = 3000m
    assert pod_requests(spec) == {"cpu": 3000}


def test_sidecars_run_with_app_containers_and_later_inits() -> None:
    spec = {
        "containers": [_c({"cpu": "1"})],
        "initContainers": [
            _c({"cpu": "500m"}, restartPolicy="Always"),  # sidecar, keeps running
            _c({"cpu": "2"}),  # regular init runs next to the sidecar: 2500m peak
        ],
    }
    # app phase: 1000m + sidecar 500m = 1500m; init peak 2000m + 500m = 2500m -> 2500m
    assert pod_requests(spec) == {"cpu": 2500}


def test_overhead_added_to_requests_and_only_to_set_limits() -> None:
    spec = {
        "containers": [_c({"cpu": "1", "memory": "1Gi"}, {"cpu": "2"})],
        "overhead": {"cpu": "100m", "memory": "64Mi"},
    }
    assert pod_requests(spec) == {"cpu": 1100, "memory": 2**30 + 64 * 2**20}
    # memory has no limit, so overhead does not create one
    assert pod_limits(spec) == {"cpu": 2100}


def test_bad_quantity_names_the_resource() -> None:
    with pytest.raises(QuantityError, match="memory"):
        parse_resource_list({"memory": "lots"})
