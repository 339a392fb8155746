"""Queue grants: a namespace uses only the queues granted to it, and what runs there outside Phalanx
is charged to the queue it is bound to (docs/user-guide.md "Queues")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.core import PlannerConfig, plan
from controller.core.model import Admit, GangKey, Plan, QueueGrant, Reason, Wait

from .builders import GPU, NOW, GangBuilder, GangLike, PodLike, gang, node, pod, queue, snapshot

QUEUES = [
    queue("team-a", gpu=(2, 2, 1)),
    queue("team-b", gpu=(4, None, 1)),
    queue("shared", gpu=(0, None, 1)),
]
GRANTS = {"a": QueueGrant("team-a", ("shared",)), "b": QueueGrant("team-b")}


def run(
    gangs: Sequence[GangLike], pods: Sequence[PodLike] = (), grants: Mapping[str, QueueGrant] = GRANTS
) -> Plan:
    nodes = [node(f"n{i}").gpus(8) for i in range(2)]
    return plan(
        snapshot(nodes, gangs, pods, opted_in=("a", "b", "lab"), queues=QUEUES, grants=grants),
        PlannerConfig(),
    )


def job(name: str, namespace: str, queue_name: str | None, gpus: int = 1) -> GangBuilder:
    return gang(name).ns(namespace).queue(queue_name).min(1).created(NOW - 100).gated_members(1, gpus=gpus)


def decision(result: Plan, namespace: str, name: str) -> object:
    return result.for_gang(GangKey(namespace, name))


def test_a_bound_namespace_may_not_name_another_teams_queue_and_is_not_charged_to_it() -> None:
    result = run([job("escape", "a", "team-b", gpus=4)])
    refused = decision(result, "a", "escape")
    assert isinstance(refused, Wait) and refused.reason is Reason.QUEUE_NOT_ALLOWED
    assert refused.message == "queue team-b is not granted to namespace a; it may use team-a, shared"
    # Charged to nobody: team B neither holds nor waits for it.
    assert result.queues["team-b"].requested.get(GPU, 0) == 0
    assert result.queues["team-b"].waiting_gangs == 0


def test_a_bound_namespace_uses_its_own_and_its_granted_queues() -> None:
    result = run([job("own", "a", "team-a"), job("granted", "a", "shared"), job("default", "a", None)])
    assert all(isinstance(decision(result, "a", n), Admit) for n in ("own", "granted"))
    # Without a queue name a gang goes to the namespace's queue (the shell resolves it): here
    # the core sees no queue, and that is allowed.
    assert isinstance(decision(result, "a", "default"), Admit)


def test_an_unbound_namespace_may_use_queues_granted_to_nobody_but_not_a_teams_queue() -> None:
    result = run(
        [job("open", "lab", "shared"), job("taken", "lab", "team-a")], grants={"a": QueueGrant("team-a")}
    )
    assert isinstance(decision(result, "lab", "open"), Admit)
    refused = decision(result, "lab", "taken")
    assert isinstance(refused, Wait) and refused.reason is Reason.QUEUE_NOT_ALLOWED
    assert (
        refused.message
        == "queue team-a is not granted to namespace lab; it may use queues granted to no namespace"
    )


def test_without_grants_any_namespace_names_any_queue_as_before() -> None:
    result = run([job("kai-style", "lab", "team-b")], grants={})
    assert isinstance(decision(result, "lab", "kai-style"), Admit)


def running_outside(name: str, namespace: str, gpus: int, group: str | None = None) -> PodLike:
    built = pod(name).ns(namespace).uid(f"{namespace}/{name}").gpus(gpus).on("n0").started(NOW - 60)
    return built.group(group) if group else built


def test_pods_running_outside_phalanx_are_charged_to_their_namespaces_queue() -> None:
    # Two skipped pods (no gang) hold team A's 2-GPU limit; its gang waits although 14 GPUs are free.
    outside = [running_outside("skip-0", "a", 1), running_outside("skip-1", "a", 1)]
    result = run([job("gang", "a", "team-a")], outside)
    waiting = decision(result, "a", "gang")
    assert isinstance(waiting, Wait) and waiting.reason is Reason.QUEUE_LIMIT
    assert waiting.message == f"queue team-a is at its limit: 2 of 2 {GPU}; the gang needs 1"
    report = result.queues["team-a"]
    assert report.allocated == {GPU: 2, "cpu": 2000, "memory": 2 * 2**30}
    assert report.outside == report.allocated
    # Pods of an unbound namespace, finished or terminating pods are charged to nobody.
    done = pod("done").ns("a").uid("a/done").gpus(1).on("n0").phase("Succeeded")
    leaving = pod("leaving").ns("a").uid("a/leaving").gpus(1).on("n0").terminating()
    result = run([job("gang", "a", "team-a")], [running_outside("x", "lab", 4), done, leaving])
    assert isinstance(decision(result, "a", "gang"), Admit)
    assert result.queues["team-a"].outside == {}


def test_a_gang_member_is_counted_with_its_gang_not_twice() -> None:
    member = running_outside("m-0", "a", 1, group="m")
    running = gang("m").ns("a").queue("team-a").min(1).members(member).admitted({"a/m-0": "n0"})
    result = run([running])
    assert result.queues["team-a"].allocated.get(GPU) == 1
    assert result.queues["team-a"].outside == {}
