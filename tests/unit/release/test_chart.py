"""The Helm chart: the same objects as the manifests, with the values it documents.

The rendering checks run Helm itself (``$HELM``, helm on PATH, or the one
tests/localcluster/build-helm.sh builds into the cache) and skip without it.
"""

from __future__ import annotations

import copy
import glob
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.cli.preflight import PIECES, decide
from deploy.release import manifests
from deploy.release.chart import KEEP
from deploy.release.manifests import key

Obj = dict[str, Any]


def _chart(dist: Path, built: manifests.Manifests) -> Path:
    return dist / f"phalanx-{built.version}.tgz"


def _member(dist: Path, built: manifests.Manifests, name: str) -> str:
    with tarfile.open(_chart(dist, built)) as archive:
        member = archive.extractfile(f"phalanx/{name}")
        assert member is not None
        return member.read().decode()


def test_chart_metadata_and_values(dist: Path, built: manifests.Manifests) -> None:
    chart = yaml.safe_load(_member(dist, built, "Chart.yaml"))
    assert (chart["name"], chart["version"], chart["appVersion"]) == ("phalanx", built.version, built.version)
    assert chart["kubeVersion"] == ">= 1.30.0-0"
    values = yaml.safe_load(_member(dist, built, "values.yaml"))
    assert values["namespace"] == {"name": "phalanx-system", "create": True}
    assert values["image"]["repository"] + ":" + values["image"]["tag"] in manifests.images(built.core[""])
    assert (values["webhook"]["replicas"], values["controller"]["replicas"]) == (2, 2)
    # One toggle per compatibility piece, named as preflight tells users to set it.
    helm_values = decide((1, 35), [], built.version).helm_values
    assert {f"compat.{name}" for name in values["compat"]} == set(helm_values)
    assert values["compat"]["schedulingSigsK8s"] == "auto"


def helm_binary() -> str | None:
    if os.environ.get("HELM"):
        return os.environ["HELM"]
    built = sorted(glob.glob(os.path.expanduser("~/.cache/phalanx/bin/helm-*/helm")))
    return built[-1] if built else shutil.which("helm")


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    binary = helm_binary()
    if binary is None:
        pytest.skip("helm not found (set HELM or run tests/localcluster/build-helm.sh)")
    home = tmp_path_factory.mktemp("helm-home")
    return ["env", f"HOME={home}", f"XDG_CACHE_HOME={home}", f"XDG_CONFIG_HOME={home}", binary]


def _run_template(
    helm: list[str], chart: Path, *sets: str, kube_version: str = "1.35.0"
) -> subprocess.CompletedProcess[str]:
    args = [a for s in sets for a in ("--set", s)]
    return subprocess.run(
        [*helm, "template", "phalanx", str(chart), "--kube-version", kube_version, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _template(helm: list[str], chart: Path, *sets: str) -> list[Obj]:
    result = _run_template(helm, chart, *sets)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def _expected(objects: list[Obj]) -> list[Obj]:
    out = []
    for obj in copy.deepcopy(objects):
        if obj["kind"] == "CustomResourceDefinition":
            obj["metadata"].setdefault("annotations", {}).update(KEEP)
        out.append(obj)
    return sorted(out, key=key)


def _sigs(built: manifests.Manifests) -> list[Obj]:
    return built.pieces[PIECES[0].group]


def test_helm_lints_the_chart(helm: list[str], dist: Path, built: manifests.Manifests) -> None:
    result = subprocess.run(
        [*helm, "lint", "--strict", str(_chart(dist, built))], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("variant", "sets"), [("", ()), ("cert-manager", ("certManager.enabled=true",))])
def test_the_chart_renders_exactly_the_manifests(
    helm: list[str], dist: Path, built: manifests.Manifests, variant: str, sets: tuple[str, ...]
) -> None:
    rendered = _template(helm, _chart(dist, built), *sets)
    assert sorted(rendered, key=key) == _expected(built.core[variant] + _sigs(built))


def test_the_values_reach_every_place(helm: list[str], dist: Path, built: manifests.Manifests) -> None:
    rendered = _template(
        helm,
        _chart(dist, built),
        "namespace.name=ml-sched",
        "namespace.create=false",
        "image.repository=registry.example.com/phalanx",
        "image.tag=1.2.3",
        "webhook.replicas=3",
        "controller.replicas=1",
        "compat.schedulingSigsK8s=false",
        "compat.schedulingRunAi=true",
    )
    text = yaml.safe_dump_all(rendered)
    assert "phalanx-system" not in text
    # The admission policies know the controller by the ServiceAccount their bindings' paramRef names.
    refs = [o["spec"]["paramRef"] for o in rendered if "paramRef" in o.get("spec", {})]
    assert refs and all(ref["namespace"] == "ml-sched" for ref in refs)
    assert not [o for o in rendered if o["kind"] == "Namespace"]
    for obj in rendered:
        if "namespace" in obj["metadata"]:
            assert obj["metadata"]["namespace"] == "ml-sched", key(obj)
    assert manifests.images(rendered) == {"registry.example.com/phalanx:1.2.3"}
    replicas = {o["metadata"]["name"]: o["spec"]["replicas"] for o in rendered if o["kind"] == "Deployment"}
    assert replicas == {"phalanx-webhook": 3, "phalanx-controller": 1}
    crds = sorted(o["metadata"]["name"] for o in rendered if o["kind"] == "CustomResourceDefinition")
    assert crds == ["podgroups.scheduling.run.ai", "queues.scheduling.phalanx.io", "queues.scheduling.run.ai"]


def test_the_chart_refuses_kubernetes_below_the_floor(
    helm: list[str], dist: Path, built: manifests.Manifests
) -> None:
    result = _run_template(helm, _chart(dist, built), kube_version="1.29.9")
    assert result.returncode != 0
    assert "chart requires kubeVersion: >= 1.30.0-0" in result.stderr
