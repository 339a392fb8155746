"""requirements.lock (what the image installs) against pyproject.toml (what the package allows).

The lock is regenerated with `make lock`; the lowest versions pyproject.toml allows are tested by
`make floors` (part of `make test`). Between the two, every version a user or the image can get
is one the code was tested with or is pinned to.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements.lock"
# The image: CPython 3.11 on Linux (Dockerfile's python:3.11-slim or Debian bookworm's python3).
IMAGE_ENVIRONMENT = {
    **default_environment(),
    "python_version": "3.11",
    "python_full_version": "3.11.2",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_python_implementation": "CPython",
    "implementation_name": "cpython",
}


def _runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(line) for line in project["dependencies"]]


def _locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (pinned version, its hashes), from the lock's `name==version ; marker \\` entries."""
    entries: dict[str, tuple[str, list[str]]] = {}
    current: str | None = None
    for line in LOCK.read_text().splitlines():
        pin = re.match(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", line)
        if pin:
            current = canonicalize_name(pin.group(1))
            entries[current] = (pin.group(2), [])
        elif current and line.strip().startswith("--hash=sha256:"):
            entries[current][1].append(line.strip().removeprefix("--hash=sha256:").rstrip(" \\"))
    return entries


def test_the_lock_pins_every_runtime_dependency_within_pyprojects_range() -> None:
    locked = _locked()
    for requirement in _runtime_requirements():
        if requirement.marker and not requirement.marker.evaluate(IMAGE_ENVIRONMENT):
            continue
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{name} is a runtime dependency but requirements.lock does not pin it"
        version = locked[name][0]
        assert requirement.specifier.contains(version, prereleases=True), (
            f"requirements.lock pins {name}=={version}, outside pyproject.toml's {requirement}: run make lock"
        )


def test_every_pin_carries_hashes_so_pip_can_verify_what_it_downloads() -> None:
    locked = _locked()
    assert locked, "requirements.lock pins nothing"
    unhashed = [name for name, (_, hashes) in locked.items() if not hashes]
    assert not unhashed, f"pins without --hash: {unhashed} (make lock generates them)"
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for _, hashes in locked.values() for h in hashes)


def test_the_lock_pins_nothing_but_runtime_dependencies_and_theirs() -> None:
    """No dev tool (pytest, mypy, ...) in the image: the lock is compiled from [project] dependencies."""
    locked = _locked()
    for tool in ("pytest", "mypy", "ruff", "hypothesis", "matplotlib", "uv"):
        assert tool not in locked, f"{tool} is a dev tool, not something the image installs"


def test_the_image_installs_from_the_lock_with_hashes_required() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "requirements.lock" in dockerfile
    assert re.search(r"pip install [^\n]*--require-hashes[^\n]*-r requirements\.lock", dockerfile)
    # The package itself goes in without resolving dependencies again, so nothing unpinned slips in.
    assert re.search(r"pip install [^\n]*--no-deps", dockerfile)
    assert "requirements.lock" in (REPO / ".dockerignore").read_text()
