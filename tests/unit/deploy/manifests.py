"""Read the deploy/ tree: raw YAML (no tools needed), kustomize builds (needs kubectl), and a small
RBAC evaluator to ask what a ServiceAccount may do."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
IMAGE = "localhost/phalanx"
NAMESPACE = "phalanx-system"
Obj = dict[str, Any]


def load(path: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def kustomizations() -> list[Path]:
    return sorted(DEPLOY.rglob("kustomization.yaml"))


def _listed(key: str) -> list[Path]:
    paths = []
    for kustomization in kustomizations():
        spec = load(kustomization)[0]
        for entry in spec.get(key) or []:
            target = kustomization.parent / (entry["path"] if isinstance(entry, dict) else entry)
            if target.is_file():
                paths.append(target)
    return paths


def raw_resources() -> list[Obj]:
    """Every object some kustomization lists under ``resources`` (complete objects)."""
    return [doc for path in _listed("resources") for doc in load(path)]


def raw_patches() -> list[Obj]:
    """Every strategic-merge patch some kustomization lists under ``patches``."""
    return [doc for path in _listed("patches") for doc in load(path)]


def of_kind(objects: Iterable[Obj], kind: str) -> list[Obj]:
    return [obj for obj in objects if obj.get("kind") == kind]


def named(objects: Iterable[Obj], kind: str, name: str) -> Obj:
    matches = [obj for obj in of_kind(objects, kind) if obj["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


def pod_specs(objects: Iterable[Obj]) -> Iterator[tuple[str, Obj]]:
    """(label, pod spec) of every Deployment or Deployment patch."""
    for obj in of_kind(objects, "Deployment"):
        spec = obj.get("spec", {}).get("template", {}).get("spec")
        if spec:
            yield obj["metadata"]["name"], spec


def containers(pod_spec: Obj) -> list[Obj]:
    return [*pod_spec.get("initContainers", []), *pod_spec.get("containers", [])]


# ---- kustomize --------------------------------------------------------------------------------


def kubectl_binary() -> str | None:
    """$KUBECTL, else the one tests/localcluster builds, else kubectl on PATH."""
    if os.environ.get("KUBECTL"):
        return os.environ["KUBECTL"]
    built = sorted(glob.glob(os.path.expanduser("~/.cache/phalanx/bin/*/kubectl")))
    return built[-1] if built else shutil.which("kubectl")


def require_kubectl() -> str:
    binary = kubectl_binary()
    if binary is None:
        pytest.skip("kubectl not found (set KUBECTL or run tests/localcluster/build-binaries.sh)")
    return binary


def kustomize(directory: Path) -> list[Obj]:
    result = subprocess.run(
        [require_kubectl(), "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"kubectl kustomize {directory} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def write_overlay(directory: Path, resources: list[str], components: list[str], extra: str = "") -> Path:
    """A throwaway overlay in ``directory`` composing parts of deploy/ (paths relative to deploy/)."""
    rel = os.path.relpath(DEPLOY, directory)
    lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization", "resources:"]
    lines += [f"  - {rel}/{r}" for r in resources]
    if components:
        lines += ["components:", *(f"  - {rel}/{c}" for c in components)]
    (directory / "kustomization.yaml").write_text("\n".join(lines) + "\n" + extra)
    return directory


# ---- RBAC -------------------------------------------------------------------------------------


def can(
    objects: Iterable[Obj],
    service_account: str,
    verb: str,
    resource: str,
    group: str = "",
    namespace: str | None = None,
    name: str | None = None,
) -> bool:
    """Whether phalanx-system/``service_account`` may ``verb`` the resource. ``namespace`` None means
    cluster-wide (only ClusterRoleBindings count); ``name`` None means any object (rules limited by
    resourceNames do not count)."""
    objects = list(objects)
    for binding in [*of_kind(objects, "ClusterRoleBinding"), *of_kind(objects, "RoleBinding")]:
        if not any(
            s.get("kind") == "ServiceAccount"
            and s.get("name") == service_account
            and s.get("namespace") == NAMESPACE
            for s in binding.get("subjects", [])
        ):
            continue
        if binding["kind"] == "RoleBinding" and binding["metadata"].get("namespace") != namespace:
            continue
        ref = binding["roleRef"]
        role_ns = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        for role in of_kind(objects, ref["kind"]):
            if role["metadata"]["name"] != ref["name"] or role["metadata"].get("namespace") != role_ns:
                continue
            if any(_matches(rule, verb, group, resource, name) for rule in role.get("rules", [])):
                return True
    return False


def _matches(rule: Obj, verb: str, group: str, resource: str, name: str | None) -> bool:
    def has(key: str, value: str) -> bool:
        values = rule.get(key) or []
        return value in values or "*" in values

    if not (has("verbs", verb) and has("apiGroups", group) and has("resources", resource)):
        return False
    names = rule.get("resourceNames") or []
    return not names or (name is not None and name in names)
