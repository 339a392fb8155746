"""The ``k8s_versions`` marker: tests that only make sense on some Kubernetes releases.

Its hooks (imported by tests/conftest.py) deselect such a test on any other release, and list it,
with the releases it needs, in the run's summary: never a silent skip.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.localcluster.versions import ENV, KubeRelease, release

# Tests deselected because they only make sense on other Kubernetes releases, for the summary.
_OTHER_RELEASES: list[tuple[str, tuple[str, ...]]] = []


def _this_release() -> KubeRelease:
    try:
        return release()
    except ValueError as err:
        raise pytest.UsageError(f"{ENV}: {err}") from err


def pytest_report_header() -> str:
    k8s = _this_release()
    return (
        f"kubernetes: {k8s.version} (local cluster; set {ENV} for another), Workload API {k8s.workload_api}"
    )


@pytest.hookimpl(trylast=True)  # after -m, so only tests this run would have run are reported
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect tests whose ``k8s_versions`` marker does not name this run's Kubernetes minor."""
    minor = _this_release().minor
    keep: list[pytest.Item] = []
    other: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("k8s_versions")
        if marker is None or minor in marker.args:
            keep.append(item)
        else:
            other.append(item)
            _OTHER_RELEASES.append((item.nodeid, tuple(marker.args)))
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = keep


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _OTHER_RELEASES:
        return
    k8s = _this_release()
    terminalreporter.section(f"deselected: not for Kubernetes {k8s.minor}")
    for nodeid, minors in _OTHER_RELEASES:
        terminalreporter.line(f"{nodeid}: only on Kubernetes {', '.join(minors)}")
    terminalreporter.line(
        f"{len(_OTHER_RELEASES)} test(s) need another Kubernetes release; run them with {ENV}=<version> "
        "(`make test` runs the 1.35 ones on v1.35.4, `make test-versions` runs every release)"
    )
