"""The install tier is skipped, with the reason, where the image's base cannot be had."""

from __future__ import annotations

import pytest

from tests.install import prereqs


@pytest.fixture
def no_debootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PHALANX_PYTHON_IMAGE", raising=False)
    real_which = prereqs.shutil.which

    def which(name: str) -> str | None:
        return None if name == "debootstrap" else real_which(name)

    monkeypatch.setattr(prereqs.shutil, "which", which)


def test_without_debootstrap_or_a_base_image_the_reason_names_both(
    no_debootstrap: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prereqs, "_has_image", lambda engine, image: False)
    problem = prereqs._base_image_problem("podman")
    assert problem is not None
    assert "debootstrap" in problem and "PHALANX_PYTHON_IMAGE" in problem


def test_a_present_public_base_or_a_named_one_is_enough(
    no_debootstrap: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prereqs, "_has_image", lambda engine, image: image == prereqs.PUBLIC_BASE)
    assert prereqs._base_image_problem("podman") is None
    monkeypatch.setattr(prereqs, "_has_image", lambda engine, image: False)
    monkeypatch.setenv("PHALANX_PYTHON_IMAGE", "localhost/my-python:3.11")
    assert prereqs._base_image_problem("podman") is None


def test_a_docker_client_without_its_daemon_is_no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """image.sh cannot build with it, so the tier must be skipped with a reason, not fail."""
    found = {"docker": "/usr/bin/docker"}
    monkeypatch.setattr(prereqs.shutil, "which", found.get)
    monkeypatch.setattr(prereqs, "_daemon_answers", lambda docker: False)
    assert prereqs.image_engine() is None
    monkeypatch.setattr(prereqs, "missing_prerequisites", list)
    assert "podman, or docker with a daemon that answers" in (prereqs.why_not_here() or "")
    found["podman"] = "/usr/bin/podman"
    assert prereqs.image_engine() == "/usr/bin/podman"
    monkeypatch.setattr(prereqs, "_daemon_answers", lambda docker: True)
    assert prereqs.image_engine() == "/usr/bin/docker"
