"""Print the runtime dependencies installed in this environment and check each is at its floor.

`make floors` runs this in .venv-floors, after uv installed pyproject.toml's dependencies at the
lowest versions their ranges allow: it names what the floor tests then ran against, and exits 1
when a dependency is not at the floor pyproject.toml states (a floor naming no release, or a stale
environment), so a passing run really tested the floors.
"""

from __future__ import annotations

import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def floor(requirement: Requirement) -> Version | None:
    """The lowest version a requirement allows (its `>=` bound), or None without one."""
    bounds = [Version(spec.version) for spec in requirement.specifier if spec.operator == ">="]
    return max(bounds) if bounds else None


def main() -> int:
    problems: list[str] = []
    installed: list[str] = []
    for line in tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]:
        requirement = Requirement(line)
        if requirement.marker and not requirement.marker.evaluate():
            continue
        lowest = floor(requirement)
        try:
            have = Version(version(requirement.name))
        except PackageNotFoundError:
            problems.append(f"{requirement.name} is not installed")
            continue
        installed.append(f"{requirement.name} {have}")
        if lowest is None:
            problems.append(f"{requirement.name} has no floor (>=) in pyproject.toml")
        elif have != lowest:
            problems.append(f"{requirement.name} {have} is installed, not its floor {lowest}")
    print(", ".join(installed))
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
