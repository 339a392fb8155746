"""One release build per session for the release tests (kustomize runs once per overlay)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.release import chart, manifests, wheel
from tests.unit.deploy.manifests import require_kubectl


@pytest.fixture(scope="session")
def built() -> manifests.Manifests:
    require_kubectl()  # skips without kubectl, as the deploy tests do
    return manifests.build()


@pytest.fixture(scope="session")
def dist(built: manifests.Manifests, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    manifests.write(built, out)
    chart.write(built, out)
    wheel.write(built.version, out)
    return out
