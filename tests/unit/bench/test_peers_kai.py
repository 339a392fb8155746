"""How bench-peers writes a gang for KAI-scheduler and the queues it submits to (pure)."""

from __future__ import annotations

from pathlib import Path

from tests.localcluster.cluster import ClusterConfig, LocalCluster
from tests.localcluster.fleet import FleetSpec
from tests.localcluster.peers import GANG_LABEL, KaiSystem, make_system
from tests.localcluster.stages import RUN_FOR_ANNOTATION


def kai() -> KaiSystem:
    system = make_system("kai", LocalCluster(ClusterConfig(workdir=Path("/nonexistent"))), None)
    assert isinstance(system, KaiSystem)
    return system


def test_gang_is_a_podgroup_in_the_leaf_queue_then_a_job_whose_pods_name_it() -> None:
    group, body = kai().gang("bench", "g", 24, 1, "5s")
    # The PodGroup comes first: its pods must find it when the scheduler sees them.
    assert group["apiVersion"] == "scheduling.run.ai/v2alpha2"
    assert group["kind"] == "PodGroup"
    assert group["spec"] == {"minMember": 24, "queue": "bench", "priorityClassName": "train"}
    assert body["kind"] == "Job"
    assert body["spec"]["parallelism"] == body["spec"]["completions"] == 24
    # An eviction by KAI's consolidation must not fail the Job: Kubernetes' default backoffLimit.
    assert "backoffLimit" not in body["spec"]
    template = body["spec"]["template"]
    assert template["spec"]["schedulerName"] == "kai-scheduler"
    assert template["metadata"]["annotations"]["pod-group-name"] == "g"
    assert template["metadata"]["annotations"][RUN_FOR_ANNOTATION] == "5s"
    assert template["metadata"]["labels"]["kai.scheduler/queue"] == "bench"
    assert template["metadata"]["labels"][GANG_LABEL] == "g"


def test_queues_are_a_parent_and_a_leaf_whose_quota_is_the_fleet_in_kai_units() -> None:
    fleet = FleetSpec(gpu_nodes=4, gpus_per_node=8, cpu_nodes=1)
    parent, leaf = KaiSystem.queues(fleet)
    assert "parentQueue" not in parent["spec"]
    assert leaf["spec"]["parentQueue"] == parent["metadata"]["name"]
    assert leaf["metadata"]["name"] == KaiSystem.QUEUE
    resources = leaf["spec"]["resources"]
    assert resources["gpu"] == {"quota": 32, "limit": -1, "overQuotaWeight": 1}
    assert resources["cpu"]["quota"] == (4 * 64 + 32) * 1000  # millicores
    assert resources["memory"]["quota"] == (4 * 512 + 128) * 2**30 // 10**6  # MB, as KAI counts
    assert parent["spec"]["resources"] == resources


def test_scheduler_config_is_the_operators_for_a_binpack_shard() -> None:
    config = KaiSystem.scheduler_config()
    assert config["actions"] == "allocate, consolidation, reclaim, preempt, stalegangeviction"
    plugins = config["tiers"][0]["plugins"]
    names = [p["name"] for p in plugins]
    assert names[:2] == ["predicates", "proportion"]
    assert names[-3:] == ["gpupack", "nodeplacement", "gpusharingorder"]
    assert plugins[-2]["arguments"] == {"gpu": "binpack", "cpu": "binpack"}
