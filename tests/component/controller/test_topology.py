"""A gang held to one topology domain and a gang with disruption mode Single, through the real shell
(store, reconciler, executor) against the FakeKube: the PodGroup field and the workload annotation
reach the planner, and a Single victim loses only the pods the preemptor needs."""

from __future__ import annotations

from controller.api import resources as r
from controller.core.config import PlannerConfig
from shared import constants as c
from shared.jsonread import JsonObject
from tests import builders
from tests.component.controller.harness import (
    JOB,
    NS,
    Harness,
    admission_annotation,
    gang,
    gates_of,
    node,
    pod,
    podgroup,
)
from tests.component.controller.test_native_podgroups import member_pods, native_podgroup

RACK = "topology.kubernetes.io/rack"
# Any node label key makes domains; this one is not among those placement prefers on its own.
CLIQUE = "nvidia.com/gpu.clique"


def racked(h: Harness, racks: dict[str, str], key: str = RACK) -> None:
    """Nodes (name -> domain of label ``key``), 4 GPUs each."""
    for name, rack in racks.items():
        labelled = node(name)
        labelled["metadata"]["labels"][key] = rack
        h.kube.seed(r.NODES, labelled)


def domain_of(h: Harness, node_name: str | None, key: str) -> str:
    found = h.kube.obj(r.NODES, None, str(node_name))
    assert found is not None, node_name
    return str(found["metadata"]["labels"][key])


async def test_the_workload_annotation_reaches_the_podgroup_and_holds_the_gang_to_one_domain() -> None:
    h = Harness()
    # c1 has 4 GPUs, c2 8: the 6-pod gang fits only in c2 (across cliques it would start on c1).
    racked(h, {"node-a": "c1", "node-b": "c2", "node-c": "c2"}, CLIQUE)
    h.kube.seed(r.PODS, *gang(6, annotations={c.TOPOLOGY_REQUIRED_ANNOTATION: CLIQUE}))
    for _ in range(2):
        await h.step()

    pg = h.pg()
    assert pg is not None and pg["spec"]["topologyRequired"] == CLIQUE  # made by Phalanx, from the pods
    pins = {h.pin(f"g-{i}") for i in range(6)}
    assert {domain_of(h, pin, CLIQUE) for pin in pins} == {"c2"}
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(6))


async def test_the_podgroup_field_makes_the_gang_wait_and_says_why() -> None:
    h = Harness()
    # r1: 4 free GPUs; r2: 4 of its 8 taken by another namespace's pod.
    racked(h, {"node-a": "r1", "node-b": "r2", "node-c": "r2"})
    busy = pod("busy", None, "other", 4, (), None, None, node_name="node-c", phase="Running")
    h.kube.seed(r.PODS, busy)
    group = podgroup(min_member=5)
    group["spec"]["topologyRequired"] = RACK
    h.kube.seed(r.PODGROUPS, group)
    h.kube.seed(r.PODS, *gang(5))
    for _ in range(2):
        await h.step()

    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(5))
    pg = h.pg()
    assert pg is not None
    assert pg["status"]["reason"] == "InsufficientCapacity"
    assert pg["status"]["message"] == (
        f"needs 5 pods × 1 {c.GPU_RESOURCE} inside one {RACK} domain; no single {RACK} domain has 5 "
        f"free {c.GPU_RESOURCE}; the best, r1, has 4; the cluster as a whole has 8 {c.GPU_RESOURCE} "
        "free and would fit it across domains"
    )


def running_single_gang_and_a_preemptor(mode: str) -> Harness:
    """A 4-pod gang of a Job fills node-0; a 2-pod gang of higher priority waits at the gate."""
    h = Harness(planner=PlannerConfig(starvation_age_seconds=None, preemption_min_runtime_seconds=0))
    h.kube.seed(r.NODES, node("node-0"))
    h.kube.seed(
        r.NAMESPACES,
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NS, "labels": {c.OPT_IN_LABEL: c.OPT_IN_VALUE}},
        },
    )
    low = gang(4, "low", gates=(), owner=JOB)
    for p in low:
        p["spec"]["nodeName"] = "node-0"
        p["status"] = {"phase": "Running", "startTime": "2023-11-14T20:00:00Z"}
    high: list[JsonObject] = gang(2, "high", owner={**JOB, "name": "urgent", "uid": "urgent-uid"})
    for p in high:
        p["spec"]["priority"] = 100
    h.kube.seed(r.JOBS, builders.job(JOB["name"]).namespace(NS).uid(JOB["uid"]).parallelism(4).build())
    seeded = h.kube.seed(r.PODS, *low, *high)
    admitted = {p["metadata"]["uid"]: "node-0" for p in seeded if p["metadata"]["name"].startswith("low")}
    low_group = podgroup("low", min_member=4, annotations=admission_annotation(1_699_990_000.0, admitted))
    low_group["spec"]["disruptionMode"] = mode
    h.kube.seed(r.PODGROUPS, low_group)
    return h


async def test_a_single_mode_victim_loses_only_the_pods_needed_and_keeps_its_job_running() -> None:
    h = running_single_gang_and_a_preemptor("Single")

    assert not await h.step()

    evicted = sorted(w.name for w in h.kube.writes_to(r.PODS, "evict"))
    assert len(evicted) == 2 and set(evicted) <= {f"low-{i}" for i in range(4)}
    assert h.kube.writes_to(r.JOBS, "patch") == []  # its Job is not suspended
    said = {e["reason"]: e["message"] for e in h.kube.events()}
    assert said["Preempted"].startswith(
        f"lost 2 pods (2 {c.GPU_RESOURCE}) to make room for {NS}/high (priority 100); disruption mode "
        "Single: the rest keeps running"
    )
    low = h.pg("low")
    assert low is not None and c.ADMISSION_ANNOTATION in low["metadata"]["annotations"]  # still admitted
    assert h.metrics.preemption_gpus_evicted._value.get() == 2

    # The evicted pods are gone: the preemptor starts in their room, and the rest of the gang runs on.
    for _ in range(3):
        h.clock.advance(5)
        await h.step()
    assert all(not gates_of(h.pod(f"high-{i}")) for i in range(2))
    low = h.pg("low")
    assert low is not None and low["status"]["phase"] == "Running"
    remaining = {f"low-{i}" for i in range(4)} - set(evicted)
    assert all(h.pod(name) is not None for name in remaining)


async def test_an_all_mode_victim_goes_whole() -> None:
    """The positive control: the same gang with disruptionMode All is re-queued whole (its Job
    suspended)."""
    h = running_single_gang_and_a_preemptor("All")

    assert not await h.step()

    assert h.kube.writes_to(r.PODS, "evict") == []
    suspended = h.kube.writes_to(r.JOBS, "patch")
    assert suspended and suspended[0].name == "train" and suspended[0].body["spec"] == {"suspend": True}
    assert h.metrics.preemption_gpus_evicted._value.get() == 4


async def test_a_kai_podgroup_s_required_level_holds_the_gang_to_one_domain() -> None:
    h = Harness()
    # c1 has 4 GPUs, c2 8: the 6-pod gang fits only in c2.
    racked(h, {"node-a": "c1", "node-b": "c2", "node-c": "c2"}, CLIQUE)
    group = podgroup(min_member=6)
    group["apiVersion"] = r.PODGROUPS_KAI.api_version
    group["spec"]["topologyConstraint"] = {"requiredTopologyLevel": CLIQUE}
    h.kube.seed(r.PODGROUPS_KAI, group)
    h.kube.seed(r.PODS, *gang(6))
    for _ in range(2):
        await h.step()

    pins = {h.pin(f"g-{i}") for i in range(6)}
    assert {domain_of(h, pin, CLIQUE) for pin in pins} == {"c2"}


async def test_a_volcano_podgroup_s_hard_tier_holds_the_gang_to_that_level() -> None:
    h = Harness()
    # Tier 1 of the default topology is the NVLink domain: c1 and c2 have 4 GPUs each, so the
    # 6-pod gang fits the cluster but no domain of tier 1 could ever hold it.
    racked(h, {"node-a": "c1", "node-b": "c2"}, CLIQUE)
    group = podgroup(min_member=6)
    group["apiVersion"] = r.PODGROUPS_VOLCANO.api_version
    group["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    h.kube.seed(r.PODGROUPS_VOLCANO, group)
    h.kube.seed(r.PODS, *gang(6))
    for _ in range(2):
        await h.step()

    pg = h.kube.obj(r.PODGROUPS_VOLCANO, NS, "g")
    assert pg is not None and pg["status"]["reason"] == "Unschedulable", pg.get("status")
    assert f"no {CLIQUE} domain could ever hold them" in pg["status"]["message"]
    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(6))


async def test_a_kai_subgroup_s_own_required_level_holds_its_members_to_one_domain() -> None:
    h = Harness()
    # c1 and c2 have 4 GPUs each: the 5-pod gang spans both, but subgroup workers (4 members)
    # must share one domain, so the launcher alone goes to the other.
    racked(h, {"node-a": "c1", "node-b": "c2"}, CLIQUE)
    group = podgroup(min_member=5)
    group["apiVersion"] = r.PODGROUPS_KAI.api_version
    group["spec"]["subGroups"] = [
        {"name": "launcher", "minMember": 1},
        {"name": "workers", "minMember": 4, "topologyConstraint": {"requiredTopologyLevel": CLIQUE}},
    ]
    h.kube.seed(r.PODGROUPS_KAI, group)
    pods = gang(5)
    for k, member in enumerate(pods):
        member["metadata"]["labels"][c.KAI_SUBGROUP_LABEL] = "launcher" if k == 0 else "workers"
    h.kube.seed(r.PODS, *pods)
    for _ in range(2):
        await h.step()

    workers = {domain_of(h, h.pin(f"g-{i}"), CLIQUE) for i in range(1, 5)}
    assert len(workers) == 1
    assert domain_of(h, h.pin("g-0"), CLIQUE) not in workers
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(5))


async def test_kueue_and_phalanx_asking_for_different_levels_is_an_invalid_spec() -> None:
    h = Harness()
    racked(h, {"node-a": "r1", "node-b": "r2"})
    asked = {c.TOPOLOGY_REQUIRED_ANNOTATION: RACK, "kueue.x-k8s.io/podset-required-topology": CLIQUE}
    h.kube.seed(r.PODS, *gang(2, annotations=asked))
    for _ in range(2):
        await h.step()

    pg = h.pg()
    assert pg is not None
    assert pg["status"]["reason"] == "InvalidSpec"
    assert pg["status"]["message"] == (
        f"required level {RACK} (Phalanx) conflicts with {CLIQUE} (Kueue annotations); set one of them"
    )
    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(2))


async def test_a_slice_size_that_is_no_number_fails_that_gang_only() -> None:
    """ "²" passes str.isdigit() but not int(): the PodGroup annotation a tenant writes must make
    that one gang InvalidSpec, never stop the passes that admit everyone else."""
    h = Harness()
    racked(h, {"node-a": "r1", "node-b": "r2"})
    odd = podgroup(min_member=2, annotations={c.TOPOLOGY_SLICE_SIZE_ANNOTATION: "²"})
    odd["spec"]["topologySliceRequired"] = RACK
    h.kube.seed(r.PODGROUPS, odd)
    h.kube.seed(r.PODS, *gang(2, min_member=2))
    h.kube.seed(r.PODS, *gang(2, group="ok", min_member=2))
    for _ in range(2):
        assert await h.step() == set()

    pg = h.pg()
    assert pg is not None and pg["status"]["reason"] == "InvalidSpec", pg.get("status")
    assert "not a whole number" in pg["status"]["message"]
    assert all(not gates_of(h.pod(f"ok-{i}")) for i in range(2))


async def test_a_native_podgroup_and_its_members_asking_for_different_levels_is_an_invalid_spec() -> None:
    """The native PodGroup's schedulingConstraints do not silently beat what its members' workload
    asks: the gang is refused and says which two places disagree."""
    h = Harness()
    racked(h, {"node-a": "r1", "node-b": "r2"})
    group = native_podgroup(min_count=2, schedulingConstraints={"topology": [{"key": RACK}]})
    h.kube.seed(r.NATIVE_PODGROUPS, group)
    members = member_pods(2)
    for member in members:
        member["metadata"].setdefault("annotations", {})[c.TOPOLOGY_REQUIRED_ANNOTATION] = CLIQUE
    h.kube.seed(r.PODS, *members)
    for _ in range(3):
        await h.step()

    pg = h.pg("train")
    assert pg is not None and pg["status"]["reason"] == "InvalidSpec", pg.get("status") if pg else None
    assert pg["status"]["message"] == (
        f"required level {RACK} (PodGroup spec, or the native PodGroup's schedulingConstraints) "
        f"conflicts with {CLIQUE} (phalanx.io annotations on its pods); set one of them"
    )
    assert all(gates_of(h.pod(f"train-{i}")) == [c.GATE] for i in range(2))


async def test_members_whose_templates_ask_for_different_levels_are_an_invalid_spec() -> None:
    """Templates of one workload (a JobSet's jobs, an MPIJob's launcher and workers) that ask for
    different Kueue levels: neither is picked, the gang says both."""
    h = Harness()
    racked(h, {"node-a": "r1", "node-b": "r2"})
    kueue = "kueue.x-k8s.io/podset-required-topology"
    first, second = gang(2)
    first["metadata"]["annotations"][kueue] = RACK
    second["metadata"]["annotations"][kueue] = CLIQUE
    h.kube.seed(r.PODS, first, second)
    for _ in range(2):
        await h.step()

    pg = h.pg()
    assert pg is not None and pg["status"]["reason"] == "InvalidSpec", pg.get("status")
    assert pg["status"]["message"] == (
        f"required level {RACK} ({kueue} on pod g-0) conflicts with {CLIQUE} ({kueue} on pod g-1); "
        "set one of them"
    )
    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(2))
