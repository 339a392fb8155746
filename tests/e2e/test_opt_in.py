"""Per-workload opt-in on the real control plane: in a namespace that is not opted in, a Job
labelled phalanx.io/gang-scheduling=enabled is gang-scheduled -- gated, held whole while it does not
fit, released whole when it does -- and an unlabelled Job beside it is left alone."""

from __future__ import annotations

from typing import Any

from shared import constants as c
from tests import builders
from tests.conftest import NodePool
from tests.e2e.kube import GROUP_LABEL, apply, bound, gated, podgroup, pods
from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx

# Longer than the controller's resync in e2e (5 s): a hold that survives a full pass.
HOLD = 7.0


def pooled_job(name: str, parallelism: int, pool: NodePool, opted_in: bool) -> dict[str, Any]:
    manifest = builders.job(name).parallelism(parallelism).gpus(1).node_selector(pool.selector)
    if opted_in:
        manifest.label(c.OPT_IN_LABEL, c.OPT_IN_VALUE)
    return manifest.build()


def live(cluster: LocalCluster, ns: str, job: str) -> list[dict[str, Any]]:
    return [p for p in pods(cluster, ns, f"job-name={job}") if not p["metadata"].get("deletionTimestamp")]


def test_a_job_opted_in_by_its_label_is_a_gang_and_its_unlabelled_neighbour_is_untouched(
    cluster: LocalCluster, phalanx: Phalanx, namespace: str, pool: NodePool
) -> None:
    pool.add(1, gpus=4)
    # A Job without the label, in the namespace that is not opted in: never gated, runs pod by pod.
    apply(cluster, namespace, pooled_job("plain", 2, pool, opted_in=False))
    plain = eventually(
        lambda: (
            (found := live(cluster, namespace, "plain"))
            and len(found) == 2
            and all(bound(p) for p in found)
            and found
        ),
        30,
        what="the unlabelled Job's 2 pods bound",
    )
    assert not any(gated(p) or GROUP_LABEL in p["metadata"].get("labels", {}) for p in plain)
    assert "podFailurePolicy" not in cluster.kubectl_json("get", "job", "plain", "-n", namespace)["spec"]

    # The same Job labelled for opt-in, beside it: 4 GPUs needed, 2 free.
    apply(cluster, namespace, pooled_job("opted", 4, pool, opted_in=True))
    members = eventually(
        lambda: (found := live(cluster, namespace, "opted")) and len(found) == 4 and found,
        30,
        what="4 pods of the opted-in Job",
    )
    # Each pod was gated at creation and carries the group and the opt-in label (copied onto the
    # template, which is how the pod webhook's object selector saw them).
    assert all(gated(p) for p in members)
    assert {p["metadata"]["labels"][GROUP_LABEL] for p in members} == {"opted"}
    assert {p["metadata"]["labels"].get(c.OPT_IN_LABEL) for p in members} == {c.OPT_IN_VALUE}
    # What the webhook changes on an opted-in Job: a podFailurePolicy (docs/user-guide.md).
    assert "podFailurePolicy" in cluster.kubectl_json("get", "job", "opted", "-n", namespace)["spec"]
    # Held whole -- none bound, all gated -- across a controller resync, and it says why.
    stays(
        lambda: (
            len(found := live(cluster, namespace, "opted")) == 4
            and all(gated(p) and not bound(p) for p in found)
        ),
        HOLD,
        what="the opted-in gang held whole while it does not fit",
    )
    eventually(
        lambda: (
            podgroup(cluster, namespace, "opted").get("status", {}).get("reason") == "InsufficientCapacity"
        ),
        30,
        what="its PodGroup says why it waits",
    )

    # Room for the whole gang: released and bound, all 4; the plain Job's pods were never touched.
    pool.add(1, gpus=4)
    eventually(
        lambda: (
            len(found := live(cluster, namespace, "opted")) == 4
            and all(bound(p) and not gated(p) for p in found)
        ),
        60,
        what="the opted-in gang released whole",
    )
    assert sorted(p["metadata"]["uid"] for p in live(cluster, namespace, "plain")) == sorted(
        p["metadata"]["uid"] for p in plain
    )
