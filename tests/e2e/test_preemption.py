"""Priority and whole-gang preemption on the real control plane (evictions through the Eviction API)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests import builders
from tests.conftest import NodePool
from tests.e2e.kube import apply, bound, events, gated, held_through_a_pass, podgroup, pods
from tests.e2e.test_controller import count_bound, members, pooled_job, pooled_pod
from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx


def prioritised(manifest: dict[str, Any], priority_class: str) -> dict[str, Any]:
    manifest["spec"]["template"]["spec"]["priorityClassName"] = priority_class
    return manifest


def test_high_priority_gang_evicts_a_whole_low_gang_which_runs_again_later(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, classes: dict[str, str]
) -> None:
    pool.add(1, gpus=8)
    apply(
        cluster, gang_namespace, prioritised(pooled_job("low", pool).parallelism(8).build(), classes["low"])
    )
    eventually(lambda: count_bound(cluster, gang_namespace, "low") == 8, 30, what="low gang fills the node")

    apply(
        cluster,
        gang_namespace,
        prioritised(pooled_job("urgent", pool).parallelism(4).run_for("6s").build(), classes["high"]),
    )
    # Never half: pods are deleted one API call at a time, so a partial count can flash by while the
    # victim goes, but the low gang is never left running partly.
    deadline = time.monotonic() + 30
    partial_since: float | None = None
    while count_bound(cluster, gang_namespace, "urgent") < 4:
        low_bound = count_bound(cluster, gang_namespace, "low")
        if low_bound in (0, 8):
            partial_since = None
        else:
            partial_since = partial_since or time.monotonic()
            assert time.monotonic() - partial_since < 3, f"low gang left partly running: {low_bound} bound"
        assert time.monotonic() < deadline, "urgent gang not admitted within 30s"
        time.sleep(0.2)
    assert count_bound(cluster, gang_namespace, "low") == 0
    assert all(gated(p) for p in members(cluster, gang_namespace, "low"))  # recreated by the Job, gated
    assert any(e["reason"] == "Preempted" for e in events(cluster, gang_namespace, "low"))
    assert any(e["reason"] == "Preempting" for e in events(cluster, gang_namespace, "urgent"))

    # Once the urgent gang is done, the low gang runs again -- in full.
    eventually(lambda: count_bound(cluster, gang_namespace, "low") == 8, 60, what="low gang back, whole")


def test_preemption_policy_never_evicts_nothing(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, classes: dict[str, str]
) -> None:
    pool.add(1, gpus=8)
    apply(
        cluster, gang_namespace, prioritised(pooled_job("low", pool).parallelism(8).build(), classes["low"])
    )
    eventually(lambda: count_bound(cluster, gang_namespace, "low") == 8, 30, what="low gang running")
    apply(
        cluster,
        gang_namespace,
        prioritised(pooled_job("polite", pool).parallelism(4).build(), classes["never"]),
    )
    stays(
        lambda: (
            count_bound(cluster, gang_namespace, "low") == 8
            and count_bound(cluster, gang_namespace, "polite") == 0
        ),
        5.0,
        what="nothing evicted, the polite gang waits",
    )
    assert podgroup(cluster, gang_namespace, "polite")["status"]["phase"] == "Pending"


@pytest.mark.parametrize("protection", ["pdb", "marker"])
def test_protected_victims_are_never_evicted(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, classes: dict[str, str], protection: str
) -> None:
    pool.add(2, gpus=8)
    guarded = pooled_job("guarded", pool).parallelism(8)
    if protection == "marker":
        guarded.annotation("phalanx.io/preemptible", "false")
    else:
        apply(
            cluster,
            gang_namespace,
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "guarded"},
                "spec": {"minAvailable": 8, "selector": {"matchLabels": {"job-name": "guarded"}}},
            },
        )
    apply(cluster, gang_namespace, prioritised(guarded.build(), classes["low"]))
    eventually(
        lambda: count_bound(cluster, gang_namespace, "guarded") == 8, 30, what="protected gang running"
    )
    if protection == "pdb":
        eventually(
            lambda: (
                cluster.kubectl_json("get", "pdb", "guarded", "-n", gang_namespace)["status"].get(
                    "currentHealthy"
                )
                == 8
            ),
            30,
            what="PDB sees 8 healthy pods",
        )
    # A gang just like it but unprotected fills the other node: the positive control. Preemption
    # works here, and it takes the unprotected gang, never the protected one.
    apply(
        cluster, gang_namespace, prioritised(pooled_job("open", pool).parallelism(8).build(), classes["low"])
    )
    eventually(lambda: count_bound(cluster, gang_namespace, "open") == 8, 30, what="open gang running")
    apply(
        cluster,
        gang_namespace,
        prioritised(pooled_job("urgent", pool).parallelism(4).build(), classes["high"]),
    )

    def guarded_untouched() -> bool:
        return count_bound(cluster, gang_namespace, "guarded") == 8 and not any(
            p["metadata"].get("deletionTimestamp") for p in pods(cluster, gang_namespace, "job-name=guarded")
        )

    eventually(
        lambda: guarded_untouched() and count_bound(cluster, gang_namespace, "urgent") == 4,
        40,
        what="the urgent gang runs in the unprotected gang's room",
    )
    assert "Preempted" in {e["reason"] for e in events(cluster, gang_namespace, "open")}
    stays(guarded_untouched, 3.0, what="protected gang untouched")


def _held_back_by_a_reservation(cluster: LocalCluster, ns: str) -> set[str]:
    """The small gangs whose Waiting Event says, now, that the room is reserved for another."""
    return {
        e["involvedObject"]["name"]
        for e in cluster.kubectl_json("get", "events", "-n", ns)["items"]
        if e["reason"] == "Waiting"
        and e["involvedObject"]["name"].startswith("small-")
        and "reserved for starving gang" in e.get("message", "")
    }


def test_stream_of_small_gangs_does_not_starve_a_big_one(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(2, gpus=8)
    phalanx.stop_controller()
    phalanx.start_controller({"PHALANX_CONTROLLER_STARVATION_AGE_SECONDS": "3"})
    try:
        # 1-GPU gangs keep arriving and each runs 4 s: without a reservation there would always be
        # a few GPUs busy and the 16-GPU gang would wait forever.
        for i in range(4):
            apply(
                cluster, gang_namespace, pooled_job(f"small-{i}", pool).parallelism(1).run_for("4s").build()
            )
        apply(cluster, gang_namespace, pooled_job("big", pool).parallelism(16).run_for("5s").build())
        started = time.monotonic()
        i = 4
        # An Event keeps only its reason's latest message (Events are counted per object and
        # reason), so a small gang's "held back by the reservation" is seen while it lasts.
        held_back: set[str] = set()
        while count_bound(cluster, gang_namespace, "big") < 16:
            assert time.monotonic() - started < 60, "the 16-GPU gang starved"
            apply(
                cluster, gang_namespace, pooled_job(f"small-{i}", pool).parallelism(1).run_for("4s").build()
            )
            i += 1
            held_back |= _held_back_by_a_reservation(cluster, gang_namespace)
            time.sleep(0.7)
        held_back |= _held_back_by_a_reservation(cluster, gang_namespace)
        waited = time.monotonic() - started
        assert waited < 60
        big_events = events(cluster, gang_namespace, "big")
        assert "Admitted" in {e["reason"] for e in big_events}
        # It got there through a reservation, and a small gang that would have fitted was held back
        # by it (without reservations the stream keeps the 16 GPUs from ever being free together).
        assert any(e["reason"] == "Waiting" and "reserved" in e["message"] for e in big_events)
        assert held_back, "no small gang was ever held back by the reservation"
    finally:
        phalanx.stop_controller()
        phalanx.start_controller()


VICTIM_LINK = "pod-group.scheduling.sigs.k8s.io/name"


def bare_victims_and_a_preemptor(
    cluster: LocalCluster, ns: str, pool: NodePool, classes: dict[str, str]
) -> None:
    """A low-priority gang of 2 bare pods (evicted, not suspended as a Job's are) fills the 8 GPUs;
    then a high-priority gang of 2 asks for them."""
    pool.add(1, gpus=8)
    apply(
        cluster,
        ns,
        builders.podgroup("victim", 2),
    )
    for i in range(2):
        victim = pooled_pod(f"victim-{i}", pool).gpus(4).labels({VICTIM_LINK: "victim"}).build()
        victim["spec"]["priorityClassName"] = classes["low"]
        apply(cluster, ns, victim)
    eventually(
        lambda: sum(map(bound, pods(cluster, ns, f"{VICTIM_LINK}=victim"))) == 2, 30, what="victims run"
    )
    apply(
        cluster, ns, prioritised(pooled_job("urgent", pool).parallelism(2).gpus(4).build(), classes["high"])
    )


def restarted_controller(phalanx: Phalanx, env: dict[str, str]) -> None:
    phalanx.stop_controller()
    phalanx.start_controller(env)


def test_preemption_dry_run_reports_the_victims_and_evicts_nothing(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, classes: dict[str, str], phalanx: Phalanx
) -> None:
    restarted_controller(phalanx, {"PHALANX_CONTROLLER_PREEMPTION_DRY_RUN": "true"})
    try:
        bare_victims_and_a_preemptor(cluster, gang_namespace, pool, classes)
        dry = eventually(
            lambda: [
                e for e in events(cluster, gang_namespace, "urgent") if e["reason"] == "PreemptionDryRun"
            ],
            30,
            what="a PreemptionDryRun Event on the preemptor",
        )
        assert f"would evict: {gang_namespace}/victim" in dry[0]["message"], dry[0]["message"]

        def untouched() -> bool:
            victims = pods(cluster, gang_namespace, f"{VICTIM_LINK}=victim")
            return (
                len(victims) == 2
                and all(bound(p) and not p["metadata"].get("deletionTimestamp") for p in victims)
                and count_bound(cluster, gang_namespace, "urgent") == 0
            )

        held_through_a_pass(cluster, phalanx, untouched, "nothing evicted, the preemptor waits")
    finally:
        restarted_controller(phalanx, {})


def test_preemption_evicts_with_the_configured_grace_period(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, classes: dict[str, str], phalanx: Phalanx
) -> None:
    restarted_controller(phalanx, {"PHALANX_CONTROLLER_EVICTION_GRACE_SECONDS": "7"})
    # Every change of the victims, as it happens: the fake kubelet deletes them right after.
    template = '{.metadata.name} {.metadata.deletionTimestamp} {.metadata.deletionGracePeriodSeconds}{"\\n"}'
    watch = cluster.kubectl_stream(
        "get",
        "pods",
        "-n",
        gang_namespace,
        "-l",
        f"{VICTIM_LINK}=victim",
        "--watch",
        "-o",
        f"jsonpath={template}",
    )
    try:
        bare_victims_and_a_preemptor(cluster, gang_namespace, pool, classes)
        eventually(lambda: count_bound(cluster, gang_namespace, "urgent") == 2, 40, what="the preemptor runs")
    finally:
        watch.terminate()
        seen, _ = watch.communicate(timeout=10)
        restarted_controller(phalanx, {})
    # The first deletion each victim saw is the eviction's: its grace period is the setting's 7
    # seconds, not the pods' own 0.
    first_grace: dict[str, str] = {}
    for line in seen.splitlines():
        name, *deleting = line.split()
        if len(deleting) == 2:
            first_grace.setdefault(name, deleting[1])
    assert first_grace == {"victim-0": "7", "victim-1": "7"}, seen
