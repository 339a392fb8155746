"""Can this machine run the install tier? ``python -m tests.install.prereqs`` prints why not
(exit 1) or nothing (exit 0); ``make test`` uses it to run or skip the tier."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.localcluster.realnode import missing_prerequisites

# What tests/install/image.sh builds on when no base is named: the public image if present or
# pullable, else one it makes with debootstrap.
PUBLIC_BASE = "python:3.11-slim"


def _has_image(engine: str, image: str) -> bool:
    found = subprocess.run([engine, "image", "inspect", image], capture_output=True, check=False)
    return found.returncode == 0


def _base_image_problem(engine: str) -> str | None:
    """Why the image's base cannot be had here, or None. A pull is not tried (no registry may
    answer for a long time): without debootstrap, the base must be named or already present."""
    if os.environ.get("PHALANX_PYTHON_IMAGE") or shutil.which("debootstrap"):
        return None
    if _has_image(engine, PUBLIC_BASE):
        return None
    return (
        f"debootstrap (to make the image's base where {PUBLIC_BASE} cannot be pulled; "
        "Debian: apt-get install debootstrap), or PHALANX_PYTHON_IMAGE naming a base image"
    )


def _daemon_answers(docker: str) -> bool:
    try:
        return subprocess.run([docker, "info"], capture_output=True, check=False, timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def image_engine() -> str | None:
    """What tests/install/image.sh builds with: docker when its daemon answers (a docker client
    alone cannot build), else podman; None when neither."""
    docker = shutil.which("docker")
    if docker is not None and _daemon_answers(docker):
        return docker
    return shutil.which("podman")


def why_not_here() -> str | None:
    """The reason this machine cannot run the install tier, or None."""
    missing = missing_prerequisites()
    engine = image_engine()
    if engine is None:
        missing.append(
            "podman, or docker with a daemon that answers "
            "(to build the image; Debian: apt-get install podman)"
        )
    elif problem := _base_image_problem(engine):
        missing.append(problem)
    return "; ".join(missing) or None


if __name__ == "__main__":
    reason = why_not_here()
    if reason:
        print(reason)
    sys.exit(1 if reason else 0)
