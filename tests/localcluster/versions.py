"""The Kubernetes releases the local cluster runs, and what each needs to serve its Workload API.

One setting picks the release: ``PHALANX_K8S_VERSION`` (``v1.37.2``, ``1.37.2`` or just ``1.37``),
else ``DEFAULT``. Gate and API names are those of the release's own source
(``pkg/features/kube_features.go``, ``pkg/registry/scheduling/rest``): the apiserver refuses to
start on a gate it does not know.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV = "PHALANX_K8S_VERSION"


@dataclass(frozen=True)
class KubeRelease:
    version: str  # "v1.37.2"
    # The scheduling.k8s.io version serving Workload (and from 1.36 PodGroup).
    workload_api: str
    # The scheduler's own gang plugin (GangScheduling): on 1.35 and 1.36 a feature gate turns it on;
    # on 1.37 it comes with GenericWorkload and only a scheduler profile turns it off.
    gang_plugin_gate: str | None

    @property
    def minor(self) -> str:
        """``"1.37"``: what test markers and the shorthand setting name."""
        return ".".join(self.version.lstrip("v").split(".")[:2])

    @property
    def gang_plugin_default(self) -> bool:
        """Does a cluster with the Workload API on run the scheduler's gang plugin as configured by
        its release? On 1.37 it comes with GenericWorkload; on 1.35 and 1.36 it needs its own alpha
        gate, which nobody turns on by accident."""
        return self.gang_plugin_gate is None

    def feature_gates(self, gang_plugin: bool = False, extra: tuple[str, ...] = ()) -> str:
        """``extra``: further gates to turn on (``WorkloadWithJob``), after the release's own."""
        gates = ["GenericWorkload=true"]
        if gang_plugin and self.gang_plugin_gate:
            gates.append(f"{self.gang_plugin_gate}=true")
        gates += [f"{gate}=true" for gate in extra]
        return ",".join(gates)

    @property
    def runtime_config(self) -> str:
        return f"{self.workload_api}=true"

    def disabled_scheduler_plugins(self, gang_plugin: bool = False) -> list[str]:
        """Default-profile plugins the cluster's scheduler must not run."""
        return [] if gang_plugin or self.gang_plugin_gate else ["GangScheduling"]


RELEASES = (
    # Workload with inline podGroups; pods link with spec.workloadRef.
    KubeRelease("v1.35.4", "scheduling.k8s.io/v1alpha1", gang_plugin_gate="GangScheduling"),
    # Workload templates and standalone PodGroups; pods link with spec.schedulingGroup.
    KubeRelease("v1.36.3", "scheduling.k8s.io/v1alpha2", gang_plugin_gate="GangScheduling"),
    # The same model in beta; the GangScheduling gate is gone (the plugin follows GenericWorkload).
    KubeRelease("v1.37.2", "scheduling.k8s.io/v1beta1", gang_plugin_gate=None),
)
DEFAULT = "v1.37.2"  # the newest: make demo, make test and the benchmarks run on it


def supported() -> str:
    return ", ".join(r.version for r in RELEASES)


def release(name: str | None = None) -> KubeRelease:
    """The release ``name`` names (a version or its minor), else the one the environment chooses."""
    wanted = (name or os.environ.get(ENV) or DEFAULT).strip().lstrip("v")
    for candidate in RELEASES:
        if wanted in (candidate.version.lstrip("v"), candidate.minor):
            return candidate
    raise ValueError(
        f"Kubernetes {wanted!r} is not supported by the local cluster; choose one of {supported()}"
    )


# The release whose native Workload API (v1alpha1, pods' spec.workloadRef) `make test` also checks.
COMPAT = "v1.35.4"


if __name__ == "__main__":  # for the Makefile: `python3 tests/localcluster/versions.py current|compat|all`
    import sys

    try:
        chosen = release().version
    except ValueError as err:
        sys.exit(f"{ENV}: {err}")
    what = sys.argv[1] if len(sys.argv) > 1 else "current"
    print({"current": chosen, "compat": COMPAT, "all": " ".join(r.version for r in RELEASES)}[what])
