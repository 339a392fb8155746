from __future__ import annotations

import pytest

from tests.component.controller.harness import Harness


@pytest.fixture
def h() -> Harness:
    """The shell wired to a FakeKube holding two 4-GPU nodes and the opted-in namespace "team"."""
    harness = Harness()
    harness.cluster()
    return harness
