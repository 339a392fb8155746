"""The shell of --provisioning-requests: the ProvisioningRequest and PodTemplates a waiting gang
writes, the annotations its admission sets, and what its PodGroup says -- against the in-memory API
server, playing the cluster-autoscaler's part by hand."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

from controller.api import resources as r
from controller.api.kube import ApiError
from controller.core import ProvisioningConfig
from controller.pipeline.status import iso
from shared import constants as c

from .harness import KEY, NS, Harness, bind, gang, gates_of, namespace, node, pod

GPUS = c.GPU_RESOURCE


def condition(pg: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    conditions = ((pg or {}).get("status") or {}).get("conditions") or []
    return next((x for x in conditions if x["type"] == kind), {})


def requests(h: Harness) -> list[dict[str, Any]]:
    return h.kube.items(r.PROVISIONING_REQUESTS)


def asking() -> Harness:
    """Requests on (best-effort-atomic), 2 nodes × 4 GPUs."""
    h = Harness(provisioning_requests="best-effort-atomic")
    h.cluster(nodes=2, gpus=4)
    return h


async def answer(h: Harness, name: str | None = None, **conditions: tuple[str, str]) -> None:
    """The autoscaler's part: set a request's conditions (type -> (status, reason)); the only
    request unless ``name`` says which."""
    if name is None:
        [request] = requests(h)
        name = request["metadata"]["name"]
    status = {
        "conditions": [
            {
                "type": t,
                "status": s,
                "reason": why,
                "message": f"{why}.",
                "lastTransitionTime": iso(h.clock()),
            }
            for t, (s, why) in conditions.items()
        ]
    }
    await h.kube.patch(r.PROVISIONING_REQUESTS, NS, name, {"status": status}, subresource="status")


async def test_without_the_opt_in_a_gang_waiting_for_capacity_says_the_autoscaler_cannot_see_it() -> None:
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    h.kube.seed(r.PODS, *gang(3, gpus=4))  # 12 GPUs on 8
    await h.step()
    said = condition(h.pg(), "CapacityRequested")
    assert said["status"] == "False" and said["reason"] == "ProvisioningRequestsOff"
    assert "cannot see gated pods" in said["message"]
    assert "--provisioning-requests best-effort-atomic" in said["message"] and "Karpenter" in said["message"]
    assert requests(h) == []


async def test_with_requests_on_but_not_served_a_waiting_gang_says_what_to_install() -> None:
    h = asking()
    h.kube.fail("list", ApiError(404, "NotFound", "the server could not find the requested resource"),
                rt=r.PROVISIONING_REQUESTS, times=1_000)  # fmt: skip
    h.kube.seed(r.PODS, *gang(3, gpus=4))  # 12 GPUs on 8
    await h.step()
    said = condition(h.pg(), "CapacityRequested")
    assert said["status"] == "False" and said["reason"] == "ProvisioningRequestsNotServed"
    assert "--enable-provisioning-requests" in said["message"]
    assert requests(h) == []


async def test_a_waiting_gang_asks_once_and_starts_on_the_provisioned_nodes_consuming_the_request() -> None:
    h = asking()
    h.kube.seed(r.PODS, *gang(3, gpus=4))
    await h.step()

    [request] = requests(h)
    assert request["spec"]["provisioningClassName"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert request["metadata"]["ownerReferences"][0]["name"] == "g"
    [pod_set] = request["spec"]["podSets"]
    assert pod_set["count"] == 3
    template = h.kube.obj(r.POD_TEMPLATES, NS, pod_set["podTemplateRef"]["name"])
    assert template is not None
    spec = template["template"]["spec"]
    assert "schedulingGates" not in spec
    assert spec["containers"][0]["resources"]["limits"][GPUS] == "4"
    said = condition(h.pg(), "CapacityRequested")
    assert said["status"] == "True" and request["metadata"]["name"] in said["message"]
    assert "ProvisioningRequested" in h.event_reasons()

    # Passes go on: never a second request for the same gang.
    h.clock.advance(3)
    await h.step()
    assert len(requests(h)) == 1

    # The autoscaler provisions: two nodes appear and the request says Provisioned.
    await answer(h, Accepted=("True", "Accepted"), Provisioned=("True", "CapacityIsProvisioned"))
    h.kube.seed(r.NODES, node("new-0", 8), node("new-1", 8))
    h.clock.advance(3)
    await h.step()
    name = request["metadata"]["name"]
    for i in range(3):
        member = h.pod(f"g-{i}")
        assert member is not None and not gates_of(member)
        annotations = member["metadata"]["annotations"]
        assert annotations[c.CONSUME_PROVISIONING_REQUEST_ANNOTATION] == name
        assert (
            annotations[c.PROVISIONING_CLASS_ANNOTATION] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
        )
    assert "CapacityProvisioned" in h.event_reasons()

    # Bound: the booking is used and the request (with its template) goes.
    for i in range(3):
        pin = h.pin(f"g-{i}")
        assert pin is not None
        bind(h.kube, f"g-{i}", pin, phase="Running")
    h.clock.advance(3)
    await h.step()
    await h.step()
    assert requests(h) == []
    assert h.kube.items(r.POD_TEMPLATES) == []


ACCEPTED = ("True", "Accepted")
PROVISIONED = ("True", "CapacityIsProvisioned")


async def test_two_gangs_asking_at_once_each_wait_for_their_own_nodes() -> None:
    """Nodes made for one request register before either request says Provisioned: neither gang
    takes them (they may be the other's); the gang whose request is Provisioned does."""
    h = asking()
    h.kube.seed(r.PODS, *gang(3, group="a", gpus=4), *gang(3, group="b", gpus=4))
    await h.step()
    made = {x["metadata"]["labels"][c.POD_GROUP_LABEL]: x["metadata"]["name"] for x in requests(h)}
    assert sorted(made) == ["a", "b"]
    for name in made.values():
        await answer(h, name, Accepted=ACCEPTED)
    h.kube.seed(r.NODES, node("new-0", 8), node("new-1", 8))  # room for one of them
    h.clock.advance(3)
    await h.step()
    assert all(gates_of(h.pod(f"{g}-{i}")) for g in "ab" for i in range(3))
    waiting = h.pg("a")
    assert waiting is not None and "not answered yet" in waiting["status"]["message"]

    await answer(h, made["b"], Accepted=ACCEPTED, Provisioned=PROVISIONED)
    h.clock.advance(3)
    await h.step()
    for i in range(3):
        started = h.pod(f"b-{i}")
        assert started is not None and not gates_of(started)
        assert started["metadata"]["annotations"][c.CONSUME_PROVISIONING_REQUEST_ANNOTATION] == made["b"]
        assert gates_of(h.pod(f"a-{i}"))


async def test_a_request_left_unanswered_too_long_no_longer_keeps_its_gang_off_free_room() -> None:
    h = asking()
    h.kube.seed(r.PODS, *gang(3, gpus=4))
    await h.step()
    await answer(h, Accepted=ACCEPTED)
    h.kube.seed(r.NODES, node("new-0", 8), node("new-1", 8))
    h.clock.advance(3)
    await h.step()
    assert gates_of(h.pod("g-0"))
    h.clock.advance(ProvisioningConfig().answer_seconds)
    await h.step()
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(3))


async def test_a_failed_request_is_reported_and_asked_again_after_its_backoff() -> None:
    h = asking()
    h.kube.seed(r.PODS, *gang(3, gpus=4))
    await h.step()
    [first] = requests(h)
    await answer(h, Failed=("True", "FailedToBookCapacity"))
    h.clock.advance(3)
    await h.step()
    said = condition(h.pg(), "CapacityRequested")
    assert said["reason"] == "Failed" and "FailedToBookCapacity" in said["message"]
    assert "ProvisioningFailed" in h.event_reasons()
    # The failure is old news by the clock of the harness: asked again, under a new name.
    h.clock.advance(60)
    await h.step()
    [second] = requests(h)
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert second["metadata"]["annotations"][c.PROVISIONING_ATTEMPT_ANNOTATION] == "1"


async def test_check_capacity_is_the_class_asked_for_when_configured() -> None:
    h = Harness(provisioning_requests="check-capacity")
    h.cluster(nodes=2, gpus=4)
    h.kube.seed(r.PODS, *gang(3, gpus=4))
    await h.step()
    [request] = requests(h)
    assert request["spec"]["provisioningClassName"] == "check-capacity.autoscaling.x-k8s.io"


async def test_a_gang_held_by_its_queue_limit_writes_no_request() -> None:
    h = Harness(provisioning_requests="best-effort-atomic")
    h.kube.seed(r.NODES, node("node-0", 4), node("node-1", 4))
    bound_to_queue = namespace(NS)
    bound_to_queue["metadata"]["labels"]["phalanx.io/queue"] = "capped"
    h.kube.seed(r.NAMESPACES, bound_to_queue)
    queue = {
        "apiVersion": r.QUEUES.api_version,
        "kind": "Queue",
        "metadata": {"name": "capped"},
        "spec": {"resources": {GPUS: {"quota": "0", "limit": "4"}}},
    }
    h.kube.seed(r.QUEUES, queue)
    h.kube.seed(r.PODS, *gang(3, gpus=4))
    await h.step()
    pg = h.pg()
    assert pg is not None and pg["status"]["reason"] == "QueueLimit"
    assert requests(h) == []
    assert condition(pg, "CapacityRequested") == {}


def labelled(kind: str, name: str, gang_name: str, **fields: Any) -> dict[str, Any]:
    """An object carrying Phalanx's gang label that Phalanx did not make (no owner)."""
    meta = {"name": name, "namespace": NS, "labels": {c.POD_GROUP_LABEL: gang_name}}
    return {"kind": kind, "metadata": meta, **fields}


async def test_a_request_phalanx_did_not_make_is_neither_trusted_nor_touched() -> None:
    """Anyone may label a ProvisioningRequest with a gang; Phalanx reads only those its PodGroup
    controls: a forged Provisioned one does not put the gang first, and is never deleted by it."""
    h = asking()
    forged = labelled(
        "ProvisioningRequest",
        "forged",
        "g",
        spec={"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", "podSets": []},
        status={"conditions": [{"type": "Provisioned", "status": "True", "reason": "CapacityIsFound"}]},
    )
    forged["metadata"]["annotations"] = {c.PROVISIONING_ATTEMPT_ANNOTATION: "99"}
    h.kube.seed(r.PROVISIONING_REQUESTS, forged)
    h.kube.seed(r.POD_TEMPLATES, labelled("PodTemplate", "someone-elses", "g", template={}))
    h.kube.seed(r.PODS, *gang(3, gpus=4))  # 12 GPUs on 8: waits for capacity
    for _ in range(3):
        h.clock.advance(3)
        await h.step()

    names = sorted(x["metadata"]["name"] for x in requests(h))
    assert "forged" in names and len(names) == 2, names  # its own request beside the forged one
    assert h.kube.obj(r.POD_TEMPLATES, NS, "someone-elses") is not None
    said = condition(h.pg(), "CapacityRequested")
    assert "forged" not in said["message"]


async def test_a_squatted_template_name_stops_that_gang_s_request_only() -> None:
    h = asking()
    h.kube.seed(r.PODS, *gang(3, gpus=4))
    await h.step()
    [mine] = requests(h)
    template = mine["spec"]["podSets"][0]["podTemplateRef"]["name"]
    # Start again where a tenant made a PodTemplate of the name Phalanx will use first.
    h2 = asking()
    h2.kube.seed(r.POD_TEMPLATES, {"kind": "PodTemplate", "metadata": {"name": template, "namespace": NS}})
    h2.kube.seed(r.PODS, *gang(3, gpus=4))
    h2.kube.seed(r.PODS, *gang(2, group="other", gpus=8))  # 16 GPUs on 8: asks too
    await h2.step()

    names = [x["metadata"]["name"] for x in requests(h2)]
    assert [n for n in names if n.startswith("other")] and not [n for n in names if n.startswith("g-")], names
    squatted = h2.kube.obj(r.POD_TEMPLATES, NS, template)
    assert squatted is not None and "template" not in squatted  # not taken for Phalanx's, not changed
    # Its PodGroup says the request was not made, and why, not that the autoscaler was asked.
    pg = h2.pg()
    said = condition(pg, "CapacityRequested")
    assert said["status"] == "False" and said["reason"] == "ProvisioningRequestNotCreated", said
    assert "not controlled by the gang's PodGroup" in said["message"]
    assert pg is not None and "asked the cluster-autoscaler" not in pg["status"]["message"]
    assert "could not create ProvisioningRequest" in pg["status"]["message"]
    assert condition(h2.pg("other"), "CapacityRequested")["reason"] == "Requested"


async def test_a_member_that_consumes_its_own_request_keeps_it_and_starts_with_the_rest() -> None:
    """The admission policy refuses a lifting patch that changes an annotation the pod carries:
    a member whose workload names its own ProvisioningRequest must not be left gated."""
    h = asking()
    own = {c.CONSUME_PROVISIONING_REQUEST_ANNOTATION: "theirs"}
    h.kube.seed(r.PODS, *gang(1, gpus=4, annotations=own), *gang(3, gpus=4)[1:])
    await h.step()
    await answer(h, Accepted=("True", "Accepted"), Provisioned=("True", "CapacityIsProvisioned"))
    h.kube.seed(r.NODES, node("new-0", 8), node("new-1", 8))
    h.clock.advance(3)
    mark = h.mark()
    await h.step()

    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(3))
    annotations = h.pod("g-0")["metadata"]["annotations"]  # type: ignore[index]
    assert annotations[c.CONSUME_PROVISIONING_REQUEST_ANNOTATION] == "theirs"
    assert c.PROVISIONING_CLASS_ANNOTATION not in annotations
    [patch] = [w for w in h.writes_since(mark) if w.name == "g-0" and w.verb == "patch"]
    assert "metadata" not in patch.body, patch.body


def templates(h: Harness) -> list[str]:
    return sorted(x["metadata"]["name"] for x in h.kube.items(r.POD_TEMPLATES))


def two_shapes() -> list[dict[str, Any]]:
    """A gang of two member shapes (4 GPUs and 2 GPUs) that does not fit on 2 nodes × 4 GPUs."""
    return [*gang(2, gpus=4, min_member=3), pod("g-2", gpus=2, min_member=3)]


async def test_a_gang_with_more_member_shapes_than_a_request_holds_writes_nothing_and_says_why() -> None:
    """The CRD allows 32 pod sets: a request with more would be refused on every pass."""
    h = Harness(provisioning_requests="best-effort-atomic")
    h.cluster(nodes=2, gpus=4)
    members = gang(33, gpus=1)  # 33 GPUs on 8, each member a shape of its own (its CPU request)
    for i, member in enumerate(members):
        member["spec"]["containers"][0]["resources"]["requests"] = {"cpu": f"{100 + i}m"}
    h.kube.seed(r.PODS, *members)
    await h.step()

    assert requests(h) == [] and templates(h) == []
    assert h.kube.writes_to(r.POD_TEMPLATES, "create") == []
    said = condition(h.pg(), "CapacityRequested")
    assert said["status"] == "False" and said["reason"] == "ProvisioningRequestNotCreated"
    assert "33 shapes" in said["message"] and "at most 32" in said["message"], said


async def test_a_request_the_api_server_refuses_leaves_no_template_behind_and_is_asked_again() -> None:
    h = asking()
    h.kube.seed(r.PODS, *two_shapes())
    refused = ApiError(422, "Invalid", "spec.podSets: Invalid value")
    h.kube.fail("create", refused, rt=r.PROVISIONING_REQUESTS)
    await h.step()

    assert requests(h) == []
    assert len(h.kube.writes_to(r.POD_TEMPLATES, "create")) == 2  # both were made ...
    assert templates(h) == []  # ... and deleted with the request they were for
    said = condition(h.pg(), "CapacityRequested")
    assert said["reason"] == "ProvisioningRequestNotCreated" and "spec.podSets" in said["message"]

    h.clock.advance(31)
    await h.step()
    [request] = requests(h)
    assert templates(h) == pod_set_templates(request)
    assert condition(h.pg(), "CapacityRequested")["reason"] == "Requested"


async def test_a_template_delete_that_fails_does_not_leave_the_other_templates_behind() -> None:
    h = asking()
    h.kube.seed(r.PODS, *two_shapes())
    await h.step()
    [request] = requests(h)
    name = request["metadata"]["name"]
    assert templates(h) == [f"{name}-0", f"{name}-1"]
    h.kube.fail("delete", rt=r.POD_TEMPLATES, name=f"{name}-0")

    # Failed and due again: the request and its templates are replaced by the next attempt's.
    await answer(h, Failed=("True", "FailedToBookCapacity"))
    h.clock.advance(60)
    await h.step()
    [second] = requests(h)
    assert second["metadata"]["name"] != name
    assert f"{name}-1" not in templates(h)  # tried although its sibling's delete failed
    assert f"{name}-0" in templates(h)
    h.clock.advance(3)
    await h.step()
    assert not [t for t in templates(h) if t.startswith(f"{name}-")]  # deleted on the next pass


async def due(h: Harness) -> set[Hashable]:
    """The keys the work queue hands out now (its timers read the harness's clock)."""
    try:
        return await asyncio.wait_for(h.queue.get_batch(), 0.05)
    except TimeoutError:
        return set()


async def test_a_gang_is_looked_at_often_only_while_its_request_is_unanswered() -> None:
    """CapacityNotFound is the autoscaler's to retry (for days): no planning pass every 2 s."""
    h = asking()
    h.kube.seed(r.PODS, *gang(3, gpus=4))
    await h.step()
    await due(h)  # what the pass's own writes queued
    h.clock.advance(2.5)
    assert KEY in await due(h)  # Requested: looked at again after refresh_seconds

    await answer(h, Accepted=ACCEPTED, Provisioned=("False", "CapacityIsNotFound"))
    await h.step()
    assert condition(h.pg(), "CapacityRequested")["reason"] == "CapacityNotFound"
    await due(h)
    h.clock.advance(2.5)
    assert KEY not in await due(h)
    h.clock.advance(30)
    assert KEY in await due(h)


def sample(h: Harness, name: str, **labels: str) -> float:
    return h.metrics.registry.get_sample_value(name, labels) or 0.0


async def test_the_provisioning_metrics_count_each_outcome_and_time_the_provisioning() -> None:
    h = asking()
    h.kube.seed(r.PODS, *gang(3, gpus=4), *gang(3, group="other", gpus=4))
    await h.step()
    total = "phalanx_provisioning_requests_total"
    assert sample(h, total, outcome="requested") == 2
    h.clock.advance(3)
    await h.step()
    assert sample(h, total, outcome="requested") == 2  # not counted again while it stands

    mine = next(x["metadata"]["name"] for x in requests(h) if x["metadata"]["name"].startswith("g-"))
    theirs = next(x["metadata"]["name"] for x in requests(h) if x["metadata"]["name"] != mine)
    await answer(h, theirs, Failed=("True", "FailedToBookCapacity"))
    h.clock.advance(3)
    await h.step()
    assert sample(h, total, outcome="failed") == 1
    h.clock.advance(45)  # the failed one's backoff (30 s) is over: asked again, counted again
    await h.step()
    assert sample(h, total, outcome="requested") == 3
    assert sample(h, total, outcome="failed") == 1

    h.clock.advance(2)  # provisioned 53 s after it was made
    await answer(h, mine, Accepted=ACCEPTED, Provisioned=PROVISIONED)
    h.clock.advance(3)
    await h.step()
    assert sample(h, total, outcome="provisioned") == 1
    assert sample(h, "phalanx_provisioning_seconds_count") == 1
    assert sample(h, "phalanx_provisioning_seconds_sum") == 53.0
    h.kube.seed(r.NODES, node("new-0", 8), node("new-1", 8))
    h.clock.advance(3)
    await h.step()  # admitted on the new nodes: no second count
    assert not gates_of(h.pod("g-0"))
    assert sample(h, total, outcome="provisioned") == 1 and sample(h, total, outcome="failed") == 1
    assert sample(h, "phalanx_provisioning_seconds_count") == 1


async def test_a_restarted_controller_adopts_the_request_it_finds_and_makes_no_second_one() -> None:
    h = asking()
    h.kube.seed(r.PODS, *gang(3, gpus=4))
    await h.step()
    [request] = requests(h)
    await answer(h, Accepted=ACCEPTED, Provisioned=PROVISIONED)

    restarted = Harness(provisioning_requests="best-effort-atomic", restart_of=h)
    mark = restarted.mark()
    await restarted.step()  # the nodes are not there yet: the gang waits on its booking
    assert [x["metadata"]["name"] for x in requests(restarted)] == [request["metadata"]["name"]]
    assert (
        restarted.kube.writes_to(r.PROVISIONING_REQUESTS, "create")
        == h.kube.writes_to(r.PROVISIONING_REQUESTS, "create")[:1]
    )
    assert not [w for w in restarted.writes_since(mark) if w.rt in (r.PROVISIONING_REQUESTS, r.POD_TEMPLATES)]
    assert condition(restarted.pg(), "CapacityRequested")["reason"] == "Provisioned"
    assert sample(restarted, "phalanx_provisioning_requests_total", outcome="requested") == 0

    restarted.kube.seed(r.NODES, node("new-0", 8), node("new-1", 8))
    restarted.clock.advance(3)
    await restarted.step()
    started = restarted.pod("g-0")
    assert started is not None and not gates_of(started)
    consumed = started["metadata"]["annotations"][c.CONSUME_PROVISIONING_REQUEST_ANNOTATION]
    assert consumed == request["metadata"]["name"]


async def asked_for_two_shapes() -> tuple[Harness, dict[str, Any], list[str]]:
    """A gang of two shapes that asked: the harness, its request and the request's templates."""
    h = asking()
    h.kube.seed(r.PODS, *two_shapes())
    await h.step()
    [request] = requests(h)
    return h, request, templates(h)


def pod_set_templates(request: dict[str, Any]) -> list[str]:
    return sorted(s["podTemplateRef"]["name"] for s in request["spec"]["podSets"])


async def test_a_crash_between_templates_and_request_ends_with_one_request_and_no_stray_template() -> None:
    h, request, made = await asked_for_two_shapes()
    # As if the controller had died after the templates: the request was never created.
    h.kube.remove(r.PROVISIONING_REQUESTS, NS, request["metadata"]["name"])

    restarted = Harness(provisioning_requests="best-effort-atomic", restart_of=h)
    await restarted.step()
    [again] = requests(restarted)
    assert again["metadata"]["name"] == request["metadata"]["name"]
    assert templates(restarted) == made == pod_set_templates(again)

    # Once the gang is gone, so is everything it asked with.
    for member in ("g-0", "g-1", "g-2"):
        restarted.kube.remove(r.PODS, NS, member)
    restarted.clock.advance(3)
    await restarted.step()
    await restarted.step()
    assert requests(restarted) == [] and templates(restarted) == []


async def test_a_request_whose_templates_are_gone_is_asked_again_whole() -> None:
    h, request, made = await asked_for_two_shapes()
    h.kube.remove(r.POD_TEMPLATES, NS, made[0])  # as a cleanup racing its creation would leave it
    for _ in range(3):
        h.clock.advance(3)
        await h.step()
    [again] = requests(h)
    assert again["metadata"]["name"] == request["metadata"]["name"]
    assert templates(h) == made == pod_set_templates(again)
