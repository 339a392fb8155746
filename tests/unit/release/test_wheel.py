"""The plugin's wheel: only the modules kubectl-phalanx imports, requiring only what they import.

Checked independently of how the builder finds them: the wheel is unpacked into a directory and
every module in it is imported by a fresh interpreter in which the repository is not importable
and every distribution outside the wheel's Requires-Dist (and their own requirements) is blocked.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import zipfile
from importlib import metadata
from pathlib import Path

from deploy.release import manifests

SERVER_ONLY = {"cryptography", "msgspec", "uvloop"}  # the webhook's and the certificate tool's


def _wheel(dist: Path, version: str) -> Path:
    return dist / f"phalanx_kubectl-{version}-py3-none-any.whl"


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(name).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~;\s\[]", requirement, maxsplit=1)[0]).lower()


def _with_dependencies(names: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requirements = metadata.requires(name) or []
        except metadata.PackageNotFoundError:  # for other Pythons or platforms (a marker excludes it)
            continue
        for requirement in requirements:
            if "extra ==" not in requirement:
                todo.append(_name(requirement))
    return seen


def test_the_wheel_is_named_and_declares_only_the_plugins_dependencies(
    dist: Path, built: manifests.Manifests
) -> None:
    wheel = _wheel(dist, built.version)
    assert wheel.is_file()
    requires = {_name(r) for r in _requires(wheel)}
    assert not requires & SERVER_ONLY
    assert {"aiohttp", "pyyaml", "kubernetes-asyncio"} <= requires
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "kubectl-phalanx = controller.cli.__main__:main" in entry_points
    assert "controller/cli/preflight.py" in names
    assert not [n for n in names if n.startswith(("certs/", "tests/", "deploy/"))]
    assert "webhook/server.py" not in names  # the plugin dry-runs the mutation only


def test_every_module_in_the_wheel_imports_with_only_its_declared_dependencies(
    dist: Path, built: manifests.Manifests, tmp_path: Path
) -> None:
    wheel = _wheel(dist, built.version)
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
        modules = [
            n.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            for n in archive.namelist()
            if n.endswith(".py")
        ]
    allowed = _with_dependencies({_name(r) for r in _requires(wheel)})
    providers = metadata.packages_distributions()
    own = {module.split(".")[0] for module in modules}  # served from the unpacked wheel (asserted below)
    blocked = sorted(
        module
        for module, dists in providers.items()
        if module not in own and not {re.sub(r"[-_.]+", "-", d).lower() for d in dists} & allowed
    )
    script = textwrap.dedent(
        f"""
        import importlib, importlib.abc, importlib.machinery, sys
        SITE = {str(site)!r}
        BLOCKED = set({blocked!r}) - set(sys.stdlib_module_names)
        # The path finder, but without the blocked distributions: importing one fails and a probe
        # for one (find_spec, as yarl's for pydantic_core) finds nothing, as where it is not installed.
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    return None
                return importlib.machinery.PathFinder.find_spec(name, path, target)
        finders = sys.meta_path
        finders[finders.index(importlib.machinery.PathFinder)] = Block()
        sys.path.insert(0, SITE)
        for name in {modules!r}:
            module = importlib.import_module(name)
            assert module.__file__.startswith(SITE), (name, module.__file__)
        from controller.cli.__main__ import main
        try:
            main(["--help"])
        except SystemExit as exit:
            assert exit.code == 0, exit.code
        print("imported", len({modules!r}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"imported {len(modules)}" in result.stdout
