"""The kubectl plugin as its own wheel, ``phalanx_kubectl-<v>-py3-none-any.whl``.

It holds only the modules ``kubectl-phalanx`` imports (followed statically from
``controller/cli/__main__.py`` through the repository's packages) and requires only the
distributions those modules import, with the version ranges pyproject.toml gives them. The wheel is
written directly (a zip with METADATA, WHEEL, entry_points.txt and RECORD), so building it needs
no network and no build backend.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import re
import sys
import tomllib
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from deploy.release.manifests import REPO

DIST = "phalanx-kubectl"
ENTRY = "controller.cli.__main__"
SCRIPT = "kubectl-phalanx"
PACKAGES = ("controller", "shared", "webhook", "certs")
# Zip entries carry this time so that the same tree gives the same wheel.
EPOCH = (1980, 1, 1, 0, 0, 0)


def _module_file(name: str) -> Path | None:
    path = REPO / Path(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:``, whose imports the plugin never runs."""
    nodes: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        nodes.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return nodes


def _imported(name: str, path: Path) -> set[str]:
    """Every module name an import statement of ``path`` may mean (``from a import b``: a and a.b)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def closure(entry: str = ENTRY) -> tuple[list[str], set[str]]:
    """(the repository's modules ``entry`` needs, the top-level names of the others it imports)."""
    modules: set[str] = set()
    external: set[str] = set()
    todo = [entry]
    while todo:
        name = todo.pop()
        if name in modules:
            continue
        path = _module_file(name)
        if path is None:  # `from package import function`: not a module
            continue
        modules.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages run first
        for imported in _imported(name, path):
            top = imported.split(".")[0]
            if top in PACKAGES:
                todo.append(imported)
            elif top not in sys.stdlib_module_names and top != "__future__":
                external.add(top)
    return sorted(modules), external


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(external: Iterable[str]) -> list[str]:
    """pyproject.toml's requirement lines for the distributions providing ``external`` modules."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = {
        _canonical(re.split(r"[<>=!~;\s\[]", line, maxsplit=1)[0]): line for line in project["dependencies"]
    }
    providers = metadata.packages_distributions()
    wanted = []
    for module in sorted(external):
        names = [_canonical(d) for d in providers.get(module, [module])]
        matches = [declared[n] for n in names if n in declared]
        if not matches:
            raise SystemExit(f"the plugin imports {module}, which pyproject.toml does not declare")
        wanted.extend(matches)
    return sorted(set(wanted))


def _license(project: dict[str, object]) -> str:
    declared = project.get("license")
    return str(declared.get("text", "") if isinstance(declared, dict) else declared)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def contents(version: str) -> dict[str, bytes]:
    """Path in the wheel -> bytes, RECORD last."""
    modules, external = closure()
    info = f"{DIST.replace('-', '_')}-{version}.dist-info"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    meta = [
        "Metadata-Version: 2.1",
        f"Name: {DIST}",
        f"Version: {version}",
        "Summary: kubectl phalanx: explain, watch, audit and preflight Phalanx gang scheduling (read-only)",
        f"License: {_license(project)}",
        f"Requires-Python: {project['requires-python']}",
        *(f"Requires-Dist: {line}" for line in requirements(external)),
    ]
    files: dict[str, bytes] = {}
    for module in modules:
        path = _module_file(module)
        assert path is not None
        files[path.relative_to(REPO).as_posix()] = path.read_bytes()
    files[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: phalanx release\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{info}/entry_points.txt"] = f"[console_scripts]\n{SCRIPT} = {ENTRY}:main\n".encode()
    record = [_record_line(name, data) for name, data in files.items()]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    return files


def write(version: str, out: Path) -> Path:
    path = out / f"{DIST.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in contents(version).items():
            entry = zipfile.ZipInfo(name, EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(entry, data)
    return path
