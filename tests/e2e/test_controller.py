"""The controller on the real control plane: whole gangs or nothing, timeouts, reasons, restarts.

Each test gets its own opted-in namespace and its own pool of fake GPU nodes (members select it
with a nodeSelector), so its capacity arithmetic does not depend on other tests.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tests import builders
from tests.conftest import NodePool
from tests.e2e.kube import (
    apply,
    bound,
    events,
    gated,
    held_through_a_pass,
    podgroup,
    pods,
    replan,
    set_pod_quota,
)
from tests.e2e.waiting import eventually, held
from tests.localcluster import LocalCluster, procs
from tests.localcluster.phalanx import Phalanx


def pooled_job(name: str, pool: NodePool) -> builders.JobBuilder:
    """A Job of one GPU per pod whose pods run in ``pool``."""
    return builders.job(name).gpus(1).node_selector(pool.selector)


def pooled_pod(name: str, pool: NodePool) -> builders.PodBuilder:
    """A bare pod of one GPU that runs in ``pool``."""
    return builders.pod(name).gpus(1).node_selector(pool.selector)


def members(cluster: LocalCluster, ns: str, job: str) -> list[dict[str, Any]]:
    return [p for p in pods(cluster, ns, f"job-name={job}") if not p["metadata"].get("deletionTimestamp")]


def count_bound(cluster: LocalCluster, ns: str, job: str) -> int:
    return sum(1 for p in members(cluster, ns, job) if bound(p) and p["status"].get("phase") != "Succeeded")


def test_two_gangs_of_five_on_eight_gpus_run_one_after_the_other(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=8)
    apply(cluster, gang_namespace, pooled_job("first", pool).parallelism(5).run_for("8s").build())
    time.sleep(0.5)
    apply(cluster, gang_namespace, pooled_job("second", pool).parallelism(5).run_for("3s").build())

    eventually(lambda: count_bound(cluster, gang_namespace, "first") == 5, 30, what="first gang bound whole")
    # The second gang waits whole: nothing of it is bound while the first one holds 5 of 8 GPUs.
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: (
            count_bound(cluster, gang_namespace, "second") == 0
            and all(gated(p) for p in members(cluster, gang_namespace, "second"))
        ),
        "second gang fully gated",
    )
    pg = podgroup(cluster, gang_namespace, "second")
    assert pg["status"]["phase"] == "Pending"
    assert pg["status"]["reason"] == "InsufficientCapacity", pg["status"]
    assert "needs 5 pods" in pg["status"]["message"], pg["status"]["message"]
    # This controller runs without --provisioning-requests: the PodGroup says an autoscaler would
    # not see the gang either, and how to let it ask.
    said = next(c for c in pg["status"]["conditions"] if c["type"] == "CapacityRequested")
    assert said["status"] == "False" and said["reason"] == "ProvisioningRequestsOff", said
    assert "cannot see gated pods" in said["message"] and "--provisioning-requests" in said["message"], said

    # When the first gang finishes, the second runs -- whole.
    eventually(
        lambda: (
            count_bound(cluster, gang_namespace, "second") == 5
            or podgroup(cluster, gang_namespace, "second")["status"].get("succeeded", 0) == 5
        ),
        40,
        what="second gang admitted after the first finished",
    )
    assert podgroup(cluster, gang_namespace, "first")["status"]["phase"] in ("Running", "Finished")


def test_gang_larger_than_its_nodes_times_out_with_nothing_bound(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    pool.add(1, gpus=8)
    apply(
        cluster,
        gang_namespace,
        pooled_job("huge", pool)
        .parallelism(10)
        .template_annotation("phalanx.io/schedule-timeout-seconds", "4")
        .build(),
    )
    # The first reason may be "3 of 10 members exist" while the Job controller is still creating pods;
    # once all ten exist, the reason must name the shortfall.
    eventually(
        lambda: "needs 10 pods" in podgroup(cluster, gang_namespace, "huge")["status"].get("message", ""),
        30,
        what="a waiting reason naming the shortfall on the PodGroup",
    )
    pg = eventually(
        lambda: (g := podgroup(cluster, gang_namespace, "huge"))["status"]["phase"] == "Failed" and g,
        30,
        what="SchedulingTimeout",
    )
    assert pg["status"]["reason"] == "SchedulingTimeout"
    assert any(e["reason"] == "TimedOut" for e in events(cluster, gang_namespace, "huge"))
    assert count_bound(cluster, gang_namespace, "huge") == 0
    assert all(gated(p) for p in members(cluster, gang_namespace, "huge"))


def test_quota_that_lets_only_part_of_a_gang_exist_holds_everyone(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=8)
    set_pod_quota(cluster, gang_namespace, "pods", 2)
    apply(cluster, gang_namespace, pooled_job("acs", pool).parallelism(3).build())
    eventually(lambda: len(members(cluster, gang_namespace, "acs")) == 2, 30, what="2 of 3 pods created")
    held_through_a_pass(
        cluster, phalanx, lambda: count_bound(cluster, gang_namespace, "acs") == 0, "nothing admitted"
    )
    assert podgroup(cluster, gang_namespace, "acs")["status"]["reason"] == "WaitingForMembers"

    set_pod_quota(cluster, gang_namespace, "pods", 10)
    eventually(lambda: count_bound(cluster, gang_namespace, "acs") == 3, 60, what="all 3 start together")


def test_statefulset_gang(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    """4 replicas of 2 GPUs with 6 of 8 GPUs free: three would fit one by one, the gang does not."""
    pool.add(1, gpus=8)
    apply(cluster, gang_namespace, pooled_pod("blocker", pool).gpus(2).build())
    eventually(
        lambda: bound(cluster.kubectl_json("get", "pod", "blocker", "-n", gang_namespace)), 20, what="blocker"
    )
    sts = builders.statefulset("ranks").replicas(4).gpus(2).node_selector(pool.selector).build()
    apply(cluster, gang_namespace, sts)

    def replicas() -> list[dict[str, Any]]:
        return pods(cluster, gang_namespace, "app=ranks")

    eventually(lambda: len(replicas()) == 4, 30, what="4 replicas created (Parallel)")
    held_through_a_pass(
        cluster, phalanx, lambda: not any(bound(p) for p in replicas()), "no replica starts on 6 of 8 GPUs"
    )
    assert podgroup(cluster, gang_namespace, "ranks")["status"]["reason"] == "InsufficientCapacity"
    cluster.kubectl("delete", "pod", "blocker", "-n", gang_namespace, "--grace-period=0")
    eventually(lambda: sum(1 for p in replicas() if bound(p)) == 4, 30, what="4 replicas bound together")
    assert podgroup(cluster, gang_namespace, "ranks")["status"]["phase"] in ("Scheduled", "Running")


def test_members_are_pinned_by_node_name_where_the_hostname_label_differs(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    """Pool nodes carry kubernetes.io/hostname=host-<name>: a pin on the hostname label would leave
    every admitted member unschedulable. The pin names the node and keeps the member's own terms."""
    nodes = pool.add(2, gpus=4)
    manifest = pooled_job("pinned", pool).parallelism(6).build()
    own_terms = [{"matchExpressions": [{"key": NodePool.LABEL, "operator": "In", "values": [pool.name]}]}]
    manifest["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": own_terms}}
    }
    apply(cluster, gang_namespace, manifest)
    eventually(lambda: count_bound(cluster, gang_namespace, "pinned") == 6, 30, what="6 members bound")
    for member in members(cluster, gang_namespace, "pinned"):
        terms = member["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        (term,) = terms["nodeSelectorTerms"]
        assert term["matchExpressions"] == own_terms[0]["matchExpressions"]
        (pin,) = term["matchFields"]
        assert pin["key"] == "metadata.name" and pin["values"] == [member["spec"]["nodeName"]]
        assert member["spec"]["nodeName"] in nodes
        assert "kubernetes.io/hostname" not in (member["spec"].get("nodeSelector") or {})


def test_chief_pod_and_worker_statefulset_share_one_podgroup(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=8)
    apply(
        cluster,
        gang_namespace,
        builders.podgroup("tf", 4),
    )
    link = {"pod-group.scheduling.sigs.k8s.io/name": "tf"}
    workers = (
        builders.statefulset("tf-worker")
        .replicas(3)
        .gpus(1)
        .template_labels(link)
        .node_selector(pool.selector)
    ).build()
    apply(cluster, gang_namespace, workers)
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: (
            not any(
                bound(p) for p in pods(cluster, gang_namespace, "pod-group.scheduling.sigs.k8s.io/name=tf")
            )
        ),
        "3 workers wait for the chief",
    )
    apply(
        cluster,
        gang_namespace,
        pooled_pod("tf-chief", pool).labels(link).build(),
    )
    eventually(
        lambda: sum(1 for p in pods(cluster, gang_namespace, "phalanx.io/pod-group=tf") if bound(p)) == 4,
        30,
        what="chief and workers bound together",
    )


def test_elastic_gang_starts_its_minimum_together_and_never_exceeds_max_member(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    """minMember 2, maxMember 3, a Job of 5. Room for 1: nothing starts (members started one by one
    would start one). Room for 2: exactly those 2, in one admission. All the room free: it grows to
    3 and no further, though a GPU stays free and 2 members wait."""
    pool.add(1, gpus=4)
    apply(
        cluster,
        gang_namespace,
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "elastic"},
            "spec": {"minMember": 2, "maxMember": 3},
        },
    )
    # Not gang members: they hold 3 of the 4 GPUs.
    for name, gpus in (("big", 2), ("small", 1)):
        apply(cluster, gang_namespace, pooled_pod(name, pool).gpus(gpus).build())
    eventually(
        lambda: (
            all(bound(p) for p in pods(cluster, gang_namespace, "!job-name"))
            and len(pods(cluster, gang_namespace, "!job-name")) == 2
        ),
        20,
        what="blockers bound",
    )
    apply(
        cluster,
        gang_namespace,
        pooled_job("elastic", pool)
        .parallelism(5)
        .template_labels({"scheduling.x-k8s.io/pod-group": "elastic"})
        .build(),
    )
    eventually(lambda: len(members(cluster, gang_namespace, "elastic")) == 5, 30, what="5 members")

    def bound_and_gated(n_bound: int) -> bool:
        elastic = members(cluster, gang_namespace, "elastic")
        return (
            count_bound(cluster, gang_namespace, "elastic") == n_bound
            and sum(map(gated, elastic)) == 5 - n_bound
        )

    held_through_a_pass(
        cluster, phalanx, lambda: bound_and_gated(0), "room for 1 of the minimum 2: none starts"
    )

    cluster.kubectl("delete", "pod", "small", "-n", gang_namespace, "--grace-period=0")
    eventually(
        lambda: count_bound(cluster, gang_namespace, "elastic") == 2, 30, what="started at minMember 2"
    )
    held_through_a_pass(cluster, phalanx, lambda: bound_and_gated(2), "the minimum, and no room for more")
    pg = podgroup(cluster, gang_namespace, "elastic")
    assert len(json.loads(pg["metadata"]["annotations"]["phalanx.io/admission"])["placement"]) == 2
    assert [e["reason"] for e in events(cluster, gang_namespace, "elastic")].count("Admitted") == 1

    cluster.kubectl("delete", "pod", "big", "-n", gang_namespace, "--grace-period=0")
    eventually(lambda: count_bound(cluster, gang_namespace, "elastic") == 3, 30, what="grew to maxMember 3")
    held_through_a_pass(cluster, phalanx, lambda: bound_and_gated(3), "maxMember 3 with a GPU to spare")
    assert "MembersAdmitted" in [e["reason"] for e in events(cluster, gang_namespace, "elastic")]


def test_job_retry_replacement_is_admitted_without_a_new_gang(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    pool.add(1, gpus=8)
    apply(cluster, gang_namespace, pooled_job("retry", pool).parallelism(4).build())
    eventually(lambda: count_bound(cluster, gang_namespace, "retry") == 4, 30, what="gang running")
    before = {p["metadata"]["uid"] for p in members(cluster, gang_namespace, "retry")}
    victim = members(cluster, gang_namespace, "retry")[0]["metadata"]
    cluster.kubectl("delete", "pod", victim["name"], "-n", gang_namespace, "--grace-period=0")
    eventually(
        lambda: (
            victim["name"] not in {p["metadata"]["name"] for p in members(cluster, gang_namespace, "retry")}
            and count_bound(cluster, gang_namespace, "retry") == 4
        ),
        30,
        what="replacement member admitted and bound",
    )
    # A replacement, not a re-formed gang: the other three ran on untouched, and the gang was
    # admitted once, its newcomer added to it.
    after = {p["metadata"]["uid"] for p in members(cluster, gang_namespace, "retry")}
    assert before - after == {victim["uid"]} and len(after - before) == 1
    reasons = [e["reason"] for e in events(cluster, gang_namespace, "retry")]
    assert reasons.count("Admitted") == 1 and "MembersAdmitted" in reasons


def test_controller_killed_mid_admission_finishes_every_gang(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx, classes: dict[str, str]
) -> None:
    """A kill right after the first gate is lifted leaves a gang half admitted. While no controller
    runs, a rival of higher priority (that never preempts) arrives which fits in the room the gang
    has not taken yet: planning from scratch would admit the rival first and leave the gang partial
    for good. The admission recorded before any gate was lifted makes the next leader finish it."""
    pool.add(4, gpus=8)  # 32 GPUs: the gang takes them all
    # One gate at a time, so that a kill right after the first lift lands in the middle of it.
    serial = {"PHALANX_CONTROLLER_PATCH_CONCURRENCY": "1"}
    contested = 0
    try:
        for round_ in range(3):
            phalanx.stop_controller(kill=True)
            name, rival = f"crash-{round_}", f"rival-{round_}"
            apply(cluster, gang_namespace, pooled_job(name, pool).parallelism(32).build())
            eventually(
                lambda name=name: len(members(cluster, gang_namespace, name)) == 32, 30, what="32 gated"
            )
            phalanx.start_controller(serial)
            eventually(
                lambda name=name: any(not gated(p) for p in members(cluster, gang_namespace, name)),
                30,
                interval=0.02,
                what="the first gate lifted",
            )
            phalanx.stop_controller(kill=True)
            lifted = sum(1 for p in members(cluster, gang_namespace, name) if not gated(p))
            rival_job = pooled_job(rival, pool).parallelism(4).build()
            rival_job["spec"]["template"]["spec"]["priorityClassName"] = classes["never"]
            apply(cluster, gang_namespace, rival_job)
            eventually(
                lambda rival=rival: len(members(cluster, gang_namespace, rival)) == 4, 30, what="rival gated"
            )
            # Planning from scratch would admit the rival: at least its 4 GPUs are not taken yet.
            contested += 0 < lifted <= 32 - 4
            phalanx.start_controller(serial)
            eventually(
                lambda name=name: count_bound(cluster, gang_namespace, name) == 32,
                40,
                what=f"{name} fully admitted after the restart",
            )
            held_through_a_pass(
                cluster,
                phalanx,
                lambda name=name, rival=rival: (
                    count_bound(cluster, gang_namespace, rival) == 0
                    and count_bound(cluster, gang_namespace, name) == 32
                ),
                "the recorded gang keeps its room; the rival waits",
            )
            cluster.kubectl("delete", "job", name, rival, "-n", gang_namespace, "--wait=false")
            eventually(
                lambda name=name: count_bound(cluster, gang_namespace, name) == 0, 30, what="room freed"
            )
            if contested:
                break
    finally:
        phalanx.stop_controller()
        phalanx.start_controller()
    # The test proves something only if a kill left a gang half lifted, with a rival that fits.
    assert contested >= 1, "no kill landed in the middle of a gate lift"


def test_a_large_gang_has_each_gate_lifted_once(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    """The pass after an admission often runs before the watch has delivered the lifts; it must
    not take the members it still sees gated for a half-finished admission and patch them again."""
    pool.add(24, gpus=8)
    apply(cluster, gang_namespace, pooled_job("wide", pool).parallelism(192).build())
    eventually(lambda: count_bound(cluster, gang_namespace, "wide") == 192, 60, what="192 bound together")
    log = (phalanx.dir / "controller.log").read_text()
    lifted_again = [
        line for line in log.splitlines() if "half-lifted" in line and f"{gang_namespace}/wide" in line
    ]
    assert lifted_again == []


def admissions(metrics_text: str) -> float:
    for line in metrics_text.splitlines():
        if line.startswith("phalanx_gang_admissions_total "):
            return float(line.split()[1])
    raise AssertionError("phalanx_gang_admissions_total not exported")


def test_a_standby_replica_never_admits_and_takes_over_when_the_leader_dies(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=8)
    standby_port = procs.free_port()
    standby = phalanx.spawn_controller(standby_port, log_name="controller-standby")
    try:
        apply(cluster, gang_namespace, pooled_job("led", pool).parallelism(4).build())
        eventually(
            lambda: count_bound(cluster, gang_namespace, "led") == 4, 30, what="admitted by the leader"
        )
        assert admissions(phalanx.metrics(port=standby_port)) == 0  # the standby wrote nothing
        lease = cluster.kubectl_json("get", "lease", "phalanx-controller", "-n", "phalanx-system")
        leader = lease["spec"]["holderIdentity"]

        phalanx.stop_controller(kill=True)  # the leader dies without releasing its lease
        apply(cluster, gang_namespace, pooled_job("after", pool).parallelism(4).build())
        eventually(
            lambda: count_bound(cluster, gang_namespace, "after") == 4, 40, what="the standby took over"
        )
        assert admissions(phalanx.metrics(port=standby_port)) >= 1
        lease = cluster.kubectl_json("get", "lease", "phalanx-controller", "-n", "phalanx-system")
        assert lease["spec"]["holderIdentity"] != leader
    finally:
        standby.terminate()
        standby.wait(10)
        if phalanx.controller is None:
            phalanx.start_controller()


def test_schedule_timeout_with_release_suspends_the_job_and_says_so(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=8)
    phalanx.stop_controller()
    phalanx.start_controller({"PHALANX_CONTROLLER_SCHEDULE_TIMEOUT_ACTION": "release"})
    try:
        apply(
            cluster,
            gang_namespace,
            pooled_job("toobig", pool)
            .parallelism(10)
            .template_annotation("phalanx.io/schedule-timeout-seconds", "3")
            .build(),
        )
        eventually(
            lambda: cluster.kubectl_json("get", "job", "toobig", "-n", gang_namespace)["spec"].get("suspend"),
            30,
            what="the Job suspended on timeout",
        )
        gave_up = eventually(
            lambda: [e for e in events(cluster, gang_namespace, "toobig") if e["reason"] == "GaveUp"],
            20,
            what="a GaveUp Event",
        )
        assert "suspended Jobs: toobig" in gave_up[0]["message"]
        eventually(lambda: not members(cluster, gang_namespace, "toobig"), 30, what="the Job's pods gone")
        # The wait's start is kept on the PodGroup: with no members left it is still timed out.
        held_through_a_pass(
            cluster,
            phalanx,
            lambda: podgroup(cluster, gang_namespace, "toobig")["status"]["reason"] == "SchedulingTimeout",
            "the PodGroup still says SchedulingTimeout after its pods are gone",
        )
        # Nothing the user submitted is gone: the Job is still there, only suspended; none ran.
        assert cluster.kubectl("get", "job", "toobig", "-n", gang_namespace, check=False).returncode == 0
        assert count_bound(cluster, gang_namespace, "toobig") == 0
    finally:
        phalanx.stop_controller()
        phalanx.start_controller()


PASSES = "phalanx_planning_pass_seconds_count"


def waiting_events(cluster: LocalCluster, ns: str, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in events(cluster, ns, name)
        if e["involvedObject"]["kind"] == "PodGroup" and e["reason"] == "Waiting"
    ]


def gauge(metrics_text: str, name: str, **labels: str) -> float | None:
    """The value of the series ``name`` that carries ``labels`` (among others), if exported."""
    for line in metrics_text.splitlines():
        series = line.split(" ")[0]
        if series.split("{")[0] == name and all(f'{k}="{v}"' in series for k, v in labels.items()):
            return float(line.split()[-1])
    return None


def test_events_keep_their_count_across_a_failover(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    """One Waiting Event per PodGroup, counted by whichever replica leads: the standby that takes
    over reads its predecessor's Event back, neither repeats it nor starts a second one, and counts
    the next change of reason on it."""
    pool.add(1, gpus=8)
    apply(cluster, gang_namespace, pooled_job("hog", pool).parallelism(1).gpus(8).build())
    eventually(lambda: count_bound(cluster, gang_namespace, "hog") == 1, 30, what="the hog runs")
    set_pod_quota(cluster, gang_namespace, "pods", 3)  # the hog and 2 of the waiter's 3 members
    apply(cluster, gang_namespace, pooled_job("waiter", pool).parallelism(3).build())
    [first] = eventually(
        lambda: waiting_events(cluster, gang_namespace, "waiter"), 30, what="a Waiting Event"
    )
    assert podgroup(cluster, gang_namespace, "waiter")["status"]["reason"] == "WaitingForMembers"
    assert first["count"] == 1
    assert first["reportingComponent"] == "phalanx.io/controller"
    assert first["reportingInstance"] == "controller"

    standby_port = procs.free_port()
    standby = phalanx.spawn_controller(standby_port, log_name="controller-standby")
    try:
        phalanx.stop_controller(kill=True)  # the leader dies without releasing its lease
        eventually(
            lambda: gauge(phalanx.metrics(port=standby_port), "phalanx_controller_leader") == 1,
            60,
            what="the standby leads",
        )
        # It has planned the waiting gang (and so claimed its Event) ...
        eventually(
            lambda: (
                gauge(phalanx.metrics(port=standby_port), "phalanx_gang_pending", reason="WaitingForMembers")
                == 1
            ),
            30,
            what="the new leader sees the gang wait",
        )
        # ... and, the reason being the same, neither counted it again nor made another Event.
        held(
            lambda: (
                [
                    (e["metadata"]["name"], e["count"])
                    for e in waiting_events(cluster, gang_namespace, "waiter")
                ]
                == [(first["metadata"]["name"], 1)]
            ),
            lambda: int(gauge(phalanx.metrics(port=standby_port), PASSES) or 0),
            lambda: replan(cluster),
            what="the predecessor's Event, uncounted",
        )

        set_pod_quota(cluster, gang_namespace, "pods", 10)  # all 3 exist now: they wait for the GPUs
        [counted] = eventually(
            lambda: [e for e in waiting_events(cluster, gang_namespace, "waiter") if e["count"] == 2],
            30,
            what="the new reason counted on the same Event",
        )
        assert counted["metadata"]["name"] == first["metadata"]["name"]
        assert counted["firstTimestamp"] == first["firstTimestamp"]
        assert "needs 3 pods" in counted["message"]
        assert counted["reportingInstance"] == "controller-standby"
        assert len(waiting_events(cluster, gang_namespace, "waiter")) == 1
    finally:
        standby.terminate()
        standby.wait(10)
        if phalanx.controller is None:
            phalanx.start_controller()


def test_a_gang_whose_failed_members_leave_too_few_says_members_failed(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    """Two bare pods (nobody recreates them) of a PodGroup of 2; one fails: the gang cannot be whole."""
    pool.add(1, gpus=8)
    link = {"pod-group.scheduling.sigs.k8s.io/name": "pair"}
    apply(
        cluster,
        gang_namespace,
        builders.podgroup("pair", 2),
    )
    for i in range(2):
        apply(
            cluster,
            gang_namespace,
            pooled_pod(f"pair-{i}", pool).labels(link).build(),
        )
    eventually(
        lambda: podgroup(cluster, gang_namespace, "pair").get("status", {}).get("running") == 2,
        30,
        what="the pair running",
    )
    failed = json.dumps({"status": {"phase": "Failed"}})
    cluster.kubectl(
        "patch", "pod", "pair-0", "-n", gang_namespace, "--subresource=status", "--type=merge", "-p", failed
    )
    status = eventually(
        lambda: (s := podgroup(cluster, gang_namespace, "pair")["status"])["reason"] == "MembersFailed" and s,
        20,
        what="MembersFailed",
    )
    assert status["phase"] == "Failed" and status["message"] == "1 members failed", status
