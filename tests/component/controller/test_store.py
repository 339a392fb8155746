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
