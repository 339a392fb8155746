"""Which Kubernetes release the local cluster runs, and the flags each release starts with (pure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.localcluster.cluster import ClusterConfig, LocalCluster
from tests.localcluster.stages import STOCK_STAGES
from tests.localcluster.versions import DEFAULT, ENV, RELEASES, release


def test_a_release_is_named_by_its_version_with_or_without_v_or_by_its_minor() -> None:
    assert release("v1.37.2").version == release("1.37.2").version == release("1.37").version == "v1.37.2"
    assert release("1.36").minor == "1.36"


def test_the_environment_chooses_and_the_default_is_used_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert release().version == DEFAULT
    monkeypatch.setenv(ENV, "1.36")
    assert release().version == "v1.36.3"


def test_an_unsupported_release_is_refused_naming_the_supported_ones() -> None:
    with pytest.raises(ValueError, match=r"'1\.34'.*v1\.35\.4, v1\.36\.3, v1\.37\.2"):
        release("1.34")


def _kwokctl_config(tmp_path: Path, **config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The kwokctl options and the kube-scheduler configuration the cluster would start with."""
    bin_dir = tmp_path / "bin"
    (bin_dir / "kwok-stages").mkdir(parents=True)
    for name in STOCK_STAGES:
        (bin_dir / "kwok-stages" / name).write_text("kind: Stage\n")
    cluster = LocalCluster(ClusterConfig(workdir=tmp_path, **config))
    cluster.bin_dir = bin_dir
    options = json.loads(cluster._config_yaml().split("\n---\n")[0])["options"]
    return options, json.loads(Path(options["kubeSchedulerConfig"]).read_text())


@pytest.mark.parametrize(
    ("version", "runtime_config"),
    [
        ("v1.35.4", "scheduling.k8s.io/v1alpha1=true"),
        ("v1.36.3", "scheduling.k8s.io/v1alpha2=true"),
        ("v1.37.2", "scheduling.k8s.io/v1beta1=true"),
    ],
)
def test_each_release_serves_its_workload_api_without_the_schedulers_gang_plugin_when_asked(
    tmp_path: Path, version: str, runtime_config: str
) -> None:
    options, scheduler = _kwokctl_config(
        tmp_path, release=release(version), scheduler_qps=70, scheduler_burst=140, gang_plugin=False
    )
    assert options["kubeVersion"] == version
    assert options["kubeRuntimeConfig"] == runtime_config
    assert options["kubeFeatureGates"] == "GenericWorkload=true"
    assert options["kubeApiserverBinary"] == str(tmp_path / "bin" / "kube-apiserver")
    # A configuration file makes kube-scheduler ignore its --kube-api-qps: the rate lives here.
    assert scheduler["clientConnection"] == {"qps": 70, "burst": 140}
    disabled = scheduler["profiles"][0].get("plugins", {}).get("multiPoint", {}).get("disabled", [])
    # 1.37 runs the gang plugin whenever GenericWorkload is on; only the profile turns it off.
    assert disabled == ([{"name": "GangScheduling"}] if version == "v1.37.2" else [])


@pytest.mark.parametrize("version", [r.version for r in RELEASES])
def test_the_gang_plugin_option_turns_the_schedulers_own_gangs_on(tmp_path: Path, version: str) -> None:
    options, scheduler = _kwokctl_config(tmp_path, release=release(version), gang_plugin=True)
    # 1.35 and 1.36 gate the plugin; 1.37 has no such gate (the apiserver would refuse an unknown one).
    gates = "GenericWorkload=true" + (",GangScheduling=true" if version != "v1.37.2" else "")
    assert options["kubeFeatureGates"] == gates
    assert "plugins" not in scheduler["profiles"][0]


@pytest.mark.parametrize("version", [r.version for r in RELEASES])
def test_by_default_the_gang_plugin_runs_where_the_release_runs_it_with_the_workload_api(
    tmp_path: Path, version: str
) -> None:
    """1.37: the plugin comes with GenericWorkload, so a cluster with the Workload API runs it and
    Phalanx is tested beside it; 1.35 and 1.36 need an alpha gate of its own, left off."""
    options, scheduler = _kwokctl_config(tmp_path, release=release(version))
    # Neither the alpha gate (1.35, 1.36) nor a profile that disables the plugin (1.37).
    assert options["kubeFeatureGates"] == "GenericWorkload=true"
    assert "plugins" not in scheduler["profiles"][0]
    assert ClusterConfig(release=release(version)).runs_gang_plugin == (version == "v1.37.2")


def test_every_release_is_a_supported_minor_once() -> None:
    minors = [r.minor for r in RELEASES]
    assert minors == sorted(set(minors)) == ["1.35", "1.36", "1.37"]
    assert DEFAULT in {r.version for r in RELEASES}


def test_further_gates_are_turned_on_after_the_releases_own(tmp_path: Path) -> None:
    options, _ = _kwokctl_config(tmp_path, release=release("1.37"), feature_gates=("WorkloadWithJob",))
    assert options["kubeFeatureGates"] == "GenericWorkload=true,WorkloadWithJob=true"


def test_the_default_release_is_the_newest() -> None:
    assert max((r.version for r in RELEASES), key=lambda v: tuple(map(int, v[1:].split(".")))) == DEFAULT


def test_further_api_versions_are_served_beside_the_releases_workload_api(tmp_path: Path) -> None:
    options, _ = _kwokctl_config(
        tmp_path, release=release("1.37"), runtime_config=("scheduling.k8s.io/v1alpha3",)
    )
    assert options["kubeRuntimeConfig"] == "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true"
