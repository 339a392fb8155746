"""The FakeKube behaves like the API server where the shell depends on it."""

from __future__ import annotations

import pytest

from controller.api import resources as r
from controller.api.kube import ApiError
from shared import constants as c
from tests.component.controller.fake_kube import FakeKube
from tests.component.controller.harness import NS, gates_of, pod, podgroup


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


async def status_of(call: object) -> int:
    try:
        await call  # type: ignore[misc]
    except ApiError as err:
        return err.status
    return 200


async def test_create_assigns_metadata_and_refuses_a_taken_name(kube: FakeKube) -> None:
    created = await kube.create(r.PODS, NS, pod("p"))
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1
    assert int(meta["resourceVersion"]) == kube.last_rv(r.PODS)
    assert await status_of(kube.create(r.PODS, NS, pod("p"))) == 409
    assert await status_of(kube.get(r.PODS, NS, "nope")) == 404


async def test_replace_needs_the_current_resource_version(kube: FakeKube) -> None:
    [pg] = kube.seed(r.PODGROUPS, podgroup())
    pg["spec"]["minMember"] = 3
    updated = await kube.replace(r.PODGROUPS, NS, "g", pg)
    assert updated["metadata"]["generation"] == 2
    assert await status_of(kube.replace(r.PODGROUPS, NS, "g", pg)) == 409  # pg's version is stale now


async def test_patches(kube: FakeKube) -> None:
    kube.seed(r.PODS, pod("p", gates=(c.GATE, "example.com/other")))
    body = {"spec": {"schedulingGates": [{"$patch": "delete", "name": c.GATE}], "nodeSelector": {"a": "b"}}}
    patched = await kube.patch(r.PODS, NS, "p", body, "strategic")
    assert gates_of(patched) == ["example.com/other"]
    assert patched["spec"]["nodeSelector"] == {"a": "b"}
    assert patched["spec"]["containers"][0]["name"] == "main"

    merged = await kube.patch(
        r.PODS, NS, "p", {"metadata": {"annotations": {"x": "1", c.INFERRED_MIN_MEMBER_ANNOTATION: None}}}
    )
    assert merged["metadata"]["annotations"] == {"x": "1"}

    ops = [
        {"op": "test", "path": "/metadata/annotations/x", "value": "1"},
        {"op": "replace", "path": "/metadata/annotations/x", "value": "2"},
        {"op": "add", "path": "/metadata/labels/k~1v", "value": "w"},
        {"op": "remove", "path": "/spec/schedulingGates/0"},
    ]
    patched = await kube.patch(r.PODS, NS, "p", ops, "json")
    assert patched["metadata"]["annotations"]["x"] == "2"
    assert patched["metadata"]["labels"]["k/v"] == "w"
    assert gates_of(patched) == []
    failing = [{"op": "test", "path": "/metadata/annotations/x", "value": "1"}]
    assert await status_of(kube.patch(r.PODS, NS, "p", failing, "json")) == 422
    assert len(kube.writes_to(r.PODS, "patch")) == 3  # failed writes are not recorded


async def test_pod_rules_gates_only_go_and_pins_only_while_gated(kube: FakeKube) -> None:
    kube.seed(r.PODS, pod("p", gates=()))
    add_gate = {"spec": {"schedulingGates": [{"name": c.GATE}]}}
    assert await status_of(kube.patch(r.PODS, NS, "p", add_gate, "strategic")) == 422
    pin = {"spec": {"nodeSelector": {c.HOSTNAME_LABEL: "node-0"}}}
    assert await status_of(kube.patch(r.PODS, NS, "p", pin, "strategic")) == 422


async def test_status_subresource(kube: FakeKube) -> None:
    kube.seed(r.PODGROUPS, podgroup())
    body = {"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Pending"}}
    after = await kube.patch(r.PODGROUPS, NS, "g", body, subresource="status")
    assert after["status"] == {"phase": "Pending"}
    assert "x" not in (after["metadata"].get("labels") or {})
    after = await kube.patch(r.PODGROUPS, NS, "g", {"status": {"phase": "Running"}})
    assert after["status"] == {"phase": "Pending"}  # the main resource ignores status


async def test_delete_with_uid_precondition_and_eviction(kube: FakeKube) -> None:
    [p, q] = kube.seed(r.PODS, pod("p"), pod("q"))
    assert await status_of(kube.delete(r.PODS, NS, "p", uid="someone-else")) == 409
    await kube.delete(r.PODS, NS, "p", uid=p["metadata"]["uid"])
    assert await status_of(kube.delete(r.PODS, NS, "p")) == 404
    kube.pdb_protected.add((NS, "q"))
    assert await status_of(kube.evict(NS, "q")) == 429
    kube.pdb_protected.clear()
    await kube.evict(NS, "q")
    assert kube.items(r.PODS) == []
    assert [w.verb for w in kube.writes] == ["delete", "evict"]
    assert q["metadata"]["uid"]


async def test_fault_injection_fails_the_nth_matching_call(kube: FakeKube) -> None:
    kube.seed(r.PODS, pod("p"))
    kube.fail("get", ApiError(503, "ServiceUnavailable", "busy"), rt=r.PODS, nth=2)
    assert await status_of(kube.get(r.PODS, NS, "p")) == 200
    assert await status_of(kube.get(r.PODS, NS, "p")) == 503
    assert await status_of(kube.get(r.PODS, NS, "p")) == 200
