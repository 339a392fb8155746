"""The shell of --provisioning-requests: the ProvisioningRequest and PodTemplates a waiting gang
writes, the annotations its admission sets, and what its PodGroup says -- against the in-memory API
server, playing the cluster-autoscaler's part by hand."""

from __future__ import annotations

from typing import Any

from controller.api import resources as r
from controller.core import ProvisioningConfig
from controller.pipeline.status import iso
from shared import constants as c

from .harness import NS, Harness, bind, gang, gates_of, namespace, node

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
    assert "cannot see gated pods" in said["message"] and "--provisioning-requests" in said["message"]
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
