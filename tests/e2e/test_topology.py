"""Topology on the real control plane, on KWOK nodes labelled in racks (and, for a pool of its
own, in four levels: zone, block, rack, NVLink domain): a gang held to one rack waits while only
the cluster has room, then starts inside one rack; a preferred-rack gang no rack holds lands inside
one block; each slice of a sliced gang lands inside one NVLink domain; Kueue TAS and KAI manifests
are held to their level unchanged, and so is a Volcano-style job (its networkTopology tier); a
sliced gang's preemption frees whole NVLink domains; preemption for a rack-bound gang frees one
rack."""

from __future__ import annotations

from tests.conftest import NodePool
from tests.e2e.kube import apply, bound, gated, held_through_a_pass, podgroup
from tests.e2e.test_controller import count_bound, members, pooled_job
from tests.e2e.waiting import eventually
from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx

RACK = "topology.kubernetes.io/rack"
HOSTNAME = "kubernetes.io/hostname"
REQUIRED = {"phalanx.io/topology-required": RACK}


def test_a_gang_that_requires_one_rack_lands_in_one_or_waits_saying_why(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    # Two racks of two 8-GPU nodes, named for this test only.
    nodes = pool.add(4, gpus=8)
    rack_of = {name: f"{pool.name}-r{1 + k // 2}" for k, name in enumerate(nodes)}
    for name, rack in rack_of.items():
        cluster.kubectl("label", "node", name, f"{RACK}={rack}", "--overwrite")

    # 4 pods × 2 GPUs fit in one node of either rack: they land inside one rack.
    apply(
        cluster,
        gang_namespace,
        pooled_job("first", pool).parallelism(4).gpus(2).annotations(REQUIRED).build(),
    )
    eventually(lambda: count_bound(cluster, gang_namespace, "first") == 4, 60, what="first gang bound")
    racks = {rack_of[p["spec"]["nodeName"]] for p in members(cluster, gang_namespace, "first")}
    assert len(racks) == 1, racks
    assert podgroup(cluster, gang_namespace, "first")["spec"]["topologyRequired"] == RACK

    # A single pod takes 4 GPUs of the other rack: one rack has 8 GPUs free, the other 12. Then
    # 7 pods × 2 GPUs fit the cluster (20 free) and would fit either rack were it empty, but no
    # rack now: the gang waits, and its PodGroup says so.
    [used] = racks
    other = next(rack for rack in rack_of.values() if rack != used)
    first_of_other = next(name for name, rack in rack_of.items() if rack == other)
    filler = pooled_job("filler", pool).parallelism(1).gpus(4)
    filler.node_selector({**pool.selector, HOSTNAME: NodePool.hostname(first_of_other)})
    apply(cluster, gang_namespace, filler.build())
    eventually(lambda: count_bound(cluster, gang_namespace, "filler") == 1, 60, what="filler bound")
    apply(
        cluster,
        gang_namespace,
        pooled_job("second", pool).parallelism(7).gpus(2).annotations(REQUIRED).build(),
    )

    def says_why() -> str | None:
        status = podgroup(cluster, gang_namespace, "second").get("status") or {}
        message = str(status.get("message", ""))
        return message if status.get("reason") == "InsufficientCapacity" else None

    message = eventually(says_why, 60, what="second gang's PodGroup to say why it waits")
    assert message == (
        f"needs 7 pods × 2 nvidia.com/gpu inside one {RACK} domain; no single {RACK} domain has 14 "
        f"free nvidia.com/gpu; the best, {other}, has 12; the cluster as a whole has 20 nvidia.com/gpu "
        "free and would fit it across domains"
    )
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: all(gated(p) and not bound(p) for p in members(cluster, gang_namespace, "second")),
        what="second gang stays gated",
    )

    # The filler ends: its rack has 16 free GPUs again and the gang starts inside it.
    cluster.kubectl("delete", "job", "filler", "-n", gang_namespace, "--wait=false")
    eventually(lambda: count_bound(cluster, gang_namespace, "second") == 7, 60, what="second gang bound")
    assert {rack_of[p["spec"]["nodeName"]] for p in members(cluster, gang_namespace, "second")} == {other}


# ---- four levels: zone > block > rack > NVLink domain (tests/localcluster/fleet.py) ---------------

BLOCK = "topology.kubernetes.io/block"
NVLINK = "nvidia.com/gpu.clique"
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"


def four_level_pool(pool: NodePool, count: int) -> dict[str, dict[str, str]]:
    """``count`` 8-GPU nodes in racks of 4, blocks of 2 racks, 2 NVLink domains of 2 nodes per
    rack (a rack's nodes join its domains in turn); node name -> its labels."""
    names = pool.add(count, gpus=8, four_levels=True, nodes_per_rack=4, racks_per_block=2, nvlink_per_rack=2)
    return {name: node_labels(pool, name) for name in names}


def node_labels(pool: NodePool, name: str) -> dict[str, str]:
    labels: dict[str, str] = pool.cluster.kubectl_json("get", "node", name)["metadata"]["labels"]
    return labels


def fill(
    cluster: LocalCluster,
    namespace: str,
    pool: NodePool,
    name: str,
    node: str,
    gpus: int = 8,
    priority_class: str | None = None,
) -> None:
    """One pod taking ``gpus`` GPUs of ``node``."""
    filler = pooled_job(name, pool).parallelism(1).gpus(gpus)
    filler.node_selector({**pool.selector, HOSTNAME: NodePool.hostname(node)})
    if priority_class:
        filler.pod_spec(priorityClassName=priority_class)
    apply(cluster, namespace, filler.build())
    eventually(lambda: count_bound(cluster, namespace, name) == 1, 60, what=f"{name} bound")


def domains(
    cluster: LocalCluster, namespace: str, job: str, labels: dict[str, dict[str, str]], key: str
) -> set[str]:
    return {labels[p["spec"]["nodeName"]][key] for p in members(cluster, namespace, job)}


def waits_saying(
    cluster: LocalCluster, namespace: str, name: str, words: str, group: str = "scheduling.sigs.k8s.io"
) -> str:
    def says() -> str | None:
        status = podgroup(cluster, namespace, name, group=group).get("status") or {}
        message = str(status.get("message", ""))
        return message if status.get("reason") == "InsufficientCapacity" and words in message else None

    return eventually(says, 60, what=f"{name}'s PodGroup to say it waits ({words})")


def test_a_preferred_rack_gang_that_no_rack_holds_lands_inside_one_block(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    # 2 blocks of 2 racks of 4 nodes. Whole nodes taken: 0, 1, 2 (block 0) and 8-11 (block 1, all
    # of rack 2). Free: 3-7 (block 0: one node of rack 0 and all of rack 1), 12-15 (block 1, rack 3).
    # No rack has 5 free nodes, block 0 has; nodes sorted by name put block 1's free nodes first
    # (pool-…-12 < pool-…-3), so a gang spread across the cluster would cross blocks.
    labels = four_level_pool(pool, 16)
    names = list(labels)
    for k in (0, 1, 2, 8, 9, 10, 11):
        fill(cluster, gang_namespace, pool, f"fill-{k}", names[k])
    preferred = {"phalanx.io/topology-preferred": RACK}
    apply(
        cluster,
        gang_namespace,
        pooled_job("wide", pool).parallelism(5).gpus(8).annotations(preferred).build(),
    )
    eventually(lambda: count_bound(cluster, gang_namespace, "wide") == 5, 60, what="wide gang bound")
    assert len(domains(cluster, gang_namespace, "wide", labels, RACK)) == 2
    assert domains(cluster, gang_namespace, "wide", labels, BLOCK) == {labels[names[3]][BLOCK]}


def test_each_slice_of_a_sliced_gang_lands_inside_one_nvlink_domain(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    # 8 nodes: 4 NVLink domains of 2 nodes (16 GPUs); consecutive nodes are in different domains.
    # 4 slices × 8 pods × 2 GPUs: each slice is exactly one domain's GPUs.
    labels = four_level_pool(pool, 8)
    sliced = {"phalanx.io/topology-slice-required": NVLINK, "phalanx.io/topology-slice-size": "8"}
    job = pooled_job("sliced", pool).parallelism(32).completions(32).gpus(2).annotations(sliced).build()
    job["spec"]["completionMode"] = "Indexed"
    apply(cluster, gang_namespace, job)
    eventually(lambda: count_bound(cluster, gang_namespace, "sliced") == 32, 90, what="sliced gang bound")
    by_slice: dict[int, set[str]] = {}
    for p in members(cluster, gang_namespace, "sliced"):
        index = int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"])
        by_slice.setdefault(index // 8, set()).add(labels[p["spec"]["nodeName"]][NVLINK])
    assert sorted(by_slice) == [0, 1, 2, 3]
    assert all(len(found) == 1 for found in by_slice.values()), by_slice
    assert len(set().union(*by_slice.values())) == 4  # one domain per slice


def test_kueue_and_kai_required_levels_hold_gangs_unchanged(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    # 8 nodes, 2 racks of 4; one whole node taken in each rack: 6 free nodes, but 3 per rack.
    labels = four_level_pool(pool, 8)
    names = list(labels)
    fill(cluster, gang_namespace, pool, "fill-a", names[0])
    fill(cluster, gang_namespace, pool, "fill-b", names[4])
    # As Kueue TAS users write it: the annotation on the pod template.
    kueue = pooled_job("kueue-tas", pool).parallelism(4).gpus(8).template_annotation(KUEUE_REQUIRED, RACK)
    apply(cluster, gang_namespace, kueue.build())
    waits_saying(cluster, gang_namespace, "kueue-tas", f"inside one {RACK} domain")
    # As KAI users write it: a PodGroup with topologyConstraint, pods linked by annotation.
    kai_group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "kai-topo"},
        "spec": {"minMember": 4, "topologyConstraint": {"requiredTopologyLevel": RACK}},
    }
    apply(cluster, gang_namespace, kai_group)
    kai = (
        pooled_job("kai-topo", pool).parallelism(4).gpus(8).template_annotation("pod-group-name", "kai-topo")
    )
    apply(cluster, gang_namespace, kai.build())
    waits_saying(cluster, gang_namespace, "kai-topo", f"inside one {RACK} domain", group="scheduling.run.ai")
    # The cluster had room all along (6 free nodes): only the racks did not. Free one rack: one of
    # the two gangs starts, inside it; the other keeps waiting for a rack.
    cluster.kubectl("delete", "job", "fill-a", "-n", gang_namespace, "--wait=false")

    def started() -> str | None:
        done = [job for job in ("kueue-tas", "kai-topo") if count_bound(cluster, gang_namespace, job) == 4]
        return done[0] if len(done) == 1 else None

    first = eventually(started, 90, what="one of the two gangs bound")
    assert domains(cluster, gang_namespace, first, labels, RACK) == {labels[names[0]][RACK]}
    other = "kai-topo" if first == "kueue-tas" else "kueue-tas"
    assert count_bound(cluster, gang_namespace, other) == 0


def test_a_volcano_style_job_is_held_to_its_tier_unchanged(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    # 8 nodes, 2 racks of 4; one whole node taken in each rack: 6 free nodes, but 3 per rack.
    labels = four_level_pool(pool, 8)
    names = list(labels)
    fill(cluster, gang_namespace, pool, "fill-a", names[0])
    fill(cluster, gang_namespace, pool, "fill-b", names[4])
    # As Volcano users write it: a scheduling.volcano.sh PodGroup whose networkTopology allows tier
    # 2 at most (the rack: the default levels counted from the narrowest, NVLink domain first),
    # pods linked by Volcano's annotation and meant for Volcano's scheduler.
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "volcano-topo"},
        "spec": {"minMember": 4, "networkTopology": {"mode": "hard", "highestTierAllowed": 2}},
    }
    apply(cluster, gang_namespace, group)
    job = (
        pooled_job("volcano-topo", pool)
        .parallelism(4)
        .gpus(8)
        .template_annotation("scheduling.k8s.io/group-name", "volcano-topo")
        .pod_spec(schedulerName="volcano")
    )
    apply(cluster, gang_namespace, job.build())
    waits_saying(
        cluster, gang_namespace, "volcano-topo", f"inside one {RACK} domain", group="scheduling.volcano.sh"
    )
    assert count_bound(cluster, gang_namespace, "volcano-topo") == 0  # the cluster has room: not a rack
    cluster.kubectl("delete", "job", "fill-a", "-n", gang_namespace, "--wait=false")
    eventually(
        lambda: count_bound(cluster, gang_namespace, "volcano-topo") == 4, 90, what="volcano-style gang bound"
    )
    assert domains(cluster, gang_namespace, "volcano-topo", labels, RACK) == {labels[names[0]][RACK]}


def test_a_sliced_gang_preempts_whole_nvlink_domains(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, classes: dict[str, str]
) -> None:
    # 8 nodes: 4 NVLink domains of 2 nodes (consecutive nodes in different domains), each node full
    # with one low-priority pod, started so that the youngest (the cheapest victims) sit one in each
    # domain. 2 slices × 2 pods × 8 GPUs: each slice needs one whole domain, so the victims are the
    # four pods of two domains, not the four youngest.
    labels = four_level_pool(pool, 8)
    names = list(labels)
    by_domain: dict[str, list[int]] = {}
    for k, name in enumerate(names):
        by_domain.setdefault(labels[name][NVLINK], []).append(k)
    older = [ks[0] for ks in by_domain.values()]
    younger = [ks[1] for ks in by_domain.values()]
    for k in older + younger:
        fill(cluster, gang_namespace, pool, f"low-{k}", names[k], priority_class=classes["low"])
    sliced = {"phalanx.io/topology-slice-required": NVLINK, "phalanx.io/topology-slice-size": "2"}
    urgent = pooled_job("urgent", pool).parallelism(4).completions(4).gpus(8).annotations(sliced)
    job = urgent.pod_spec(priorityClassName=classes["high"]).build()
    job["spec"]["completionMode"] = "Indexed"
    apply(cluster, gang_namespace, job)
    eventually(lambda: count_bound(cluster, gang_namespace, "urgent") == 4, 90, what="urgent gang bound")
    by_slice: dict[int, set[str]] = {}
    for p in members(cluster, gang_namespace, "urgent"):
        index = int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"])
        by_slice.setdefault(index // 2, set()).add(labels[p["spec"]["nodeName"]][NVLINK])
    assert all(len(found) == 1 for found in by_slice.values()), by_slice
    evicted = [k for k in range(8) if count_bound(cluster, gang_namespace, f"low-{k}") == 0]
    assert {labels[names[k]][NVLINK] for k in evicted} == set().union(*by_slice.values()), evicted
    assert len(evicted) == 4


def test_preemption_for_a_gang_held_to_one_rack_frees_one_rack(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, classes: dict[str, str]
) -> None:
    # 2 racks of 4 nodes, each node full with one low-priority pod. They are started so that the
    # four youngest (the cheapest victims) sit two in each rack: victims chosen without the rack
    # would free room in both racks, which no rack-bound gang can use.
    labels = four_level_pool(pool, 8)
    names = list(labels)
    for k in (0, 1, 4, 5, 2, 6, 3, 7):
        fill(cluster, gang_namespace, pool, f"low-{k}", names[k], priority_class=classes["low"])
    urgent = pooled_job("urgent", pool).parallelism(4).gpus(8).annotations(REQUIRED)
    apply(cluster, gang_namespace, urgent.pod_spec(priorityClassName=classes["high"]).build())
    eventually(lambda: count_bound(cluster, gang_namespace, "urgent") == 4, 90, what="urgent gang bound")
    [rack] = domains(cluster, gang_namespace, "urgent", labels, RACK)
    evicted = [k for k in range(8) if count_bound(cluster, gang_namespace, f"low-{k}") == 0]
    assert {labels[names[k]][RACK] for k in evicted} == {rack}, evicted
    assert len(evicted) == 4
