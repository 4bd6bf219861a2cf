"""The tests' warning policy (pyproject.toml's filterwarnings, tests/conftest.py): a third party's deprecation
in its own code is shown, not fatal; one attributed to koordpy's code or to the tests' own is an error; any
other warning is an error wherever it comes from."""

from __future__ import annotations

import warnings

import pytest


def _warn(category: type[Warning], module: str) -> None:
    warnings.warn_explicit(
        "something old", category, filename=f"{module.replace('.', '/')}.py", lineno=1, module=module
    )


@pytest.mark.parametrize(
    ("category", "module"),
    [(DeprecationWarning, "uvicorn.protocols.http.httptools_impl"), (PendingDeprecationWarning, "websockets")],
)
def test_a_third_party_deprecation_is_shown_not_raised(category: type[Warning], module: str) -> None:
    """Under the configured filters it must not raise: it is shown (recorded here, in place of the run's
    warnings summary; ``catch_warnings`` keeps the filters as configured)."""
    with warnings.catch_warnings(record=True) as shown:
        _warn(category, module)
    assert [(w.category, str(w.message)) for w in shown] == [(category, "something old")]


@pytest.mark.parametrize("category", [DeprecationWarning, PendingDeprecationWarning])
@pytest.mark.parametrize("module", ["koordpy.scheduler.extender.server", "koordpy", "koordpy_testkit.processes"])
def test_a_deprecation_in_koordpy_is_an_error(category: type[Warning], module: str) -> None:
    with pytest.raises(category):
        _warn(category, module)


def test_a_deprecation_in_a_test_module_is_an_error() -> None:
    with pytest.raises(DeprecationWarning):
        _warn(DeprecationWarning, __name__)
    with pytest.raises(DeprecationWarning):
        _warn(DeprecationWarning, "cluster_kit")


@pytest.mark.parametrize("category", [UserWarning, RuntimeWarning, ResourceWarning])
def test_other_warnings_stay_errors_even_from_third_parties(category: type[Warning]) -> None:
    with pytest.raises(category):
        _warn(category, "aiohttp.client")
