"""The in-memory store's indexes stay as small as the cluster."""

from __future__ import annotations

from controller.api.store import Store
from tests.component.controller.harness import pod


def test_gangs_that_come_and_go_leave_no_index_entries() -> None:
    store = Store()
    for i in range(100):
        raw = pod(f"p-{i}", group=f"g-{i}")
        raw["metadata"]["uid"] = f"uid-{i}"
        store.upsert_pod(raw)
        relabelled = pod(f"p-{i}", group=f"h-{i}")  # moved to another group, then gone
        relabelled["metadata"]["uid"] = f"uid-{i}"
        store.upsert_pod(relabelled)
        store.delete_pod(relabelled)
    assert store.pods == {}
    assert dict(store.pods_by_gang) == {}
    assert store.gang_keys() == set()


def test_a_lifted_pod_shows_ungated_until_the_informer_agrees_then_nothing_is_kept() -> None:
    store = Store()
    raw = pod("p-0", group="g")
    raw["metadata"]["uid"] = "uid-0"
    store.upsert_pod(raw)
    assert store.pods["uid-0"].gated

    store.assume_lifted("uid-0")
    assert not store.pods["uid-0"].gated
    store.upsert_pod(raw)  # an event written before the lift (kwok, the scheduler) arrives late
    assert not store.pods["uid-0"].gated

    lifted = pod("p-0", group="g")
    lifted["metadata"]["uid"] = "uid-0"
    lifted["spec"].pop("schedulingGates")
    store.upsert_pod(lifted)
    assert not store.pods["uid-0"].gated
    assert store._lifted == set()

    store.assume_lifted("uid-0")  # already ungated: nothing to remember
    store.delete_pod(lifted)
    assert store._lifted == set()
