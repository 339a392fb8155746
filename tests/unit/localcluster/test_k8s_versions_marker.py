"""A test marked for other Kubernetes releases is deselected and listed in the summary, not skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.localcluster.cluster import REPO

TESTS = """
import pytest

@pytest.mark.k8s_versions("1.35")
def test_v1alpha1_only():
    pass

@pytest.mark.k8s_versions("1.36", "1.37")
def test_schedulinggroup_only():
    pass

def test_everywhere():
    pass
"""


def run(tmp_path: Path, version: str) -> str:
    (tmp_path / "test_marked.py").write_text(TESTS)
    (tmp_path / "conftest.py").write_text(
        "from tests.k8s_versions import pytest_collection_modifyitems, pytest_terminal_summary\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PHALANX_K8S_VERSION": version, "PYTHONPATH": str(REPO)},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_on_137_the_135_test_is_deselected_with_its_reason(tmp_path: Path) -> None:
    out = run(tmp_path, "v1.37.2")
    assert "2 passed, 1 deselected" in out
    assert "deselected: not for Kubernetes 1.37" in out
    assert "test_marked.py::test_v1alpha1_only: only on Kubernetes 1.35" in out
    assert "skipped" not in out


def test_on_135_the_others_are(tmp_path: Path) -> None:
    out = run(tmp_path, "1.35")
    assert "2 passed, 1 deselected" in out
    assert "test_marked.py::test_schedulinggroup_only: only on Kubernetes 1.36, 1.37" in out
