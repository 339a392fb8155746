"""The list-then-watch Informer against the FakeKube, feeding the real Store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from controller.api import records
from controller.api import resources as r
from controller.api.admission_record import AdmissionRecord
from controller.api.informer import Informer
from controller.api.store import Store, sinks_for
from controller.core.model import GangKey
from tests.component.controller.fake_kube import FakeKube
from tests.component.controller.harness import NS, node, pod, podgroup, until


@pytest.fixture
async def running() -> AsyncIterator[tuple[FakeKube, Store, Informer, Informer]]:
    """Node and pod informers over a fake with one node and one gang member."""
    kube = FakeKube()
    kube.seed(r.NODES, node("node-0"))
    kube.seed(r.PODS, pod("g-0"))
    store = Store()
    sinks = sinks_for(store, r.PODGROUP_TYPES)
    nodes = Informer(kube, r.NODES, sinks[str(r.NODES)])
    pods = Informer(kube, r.PODS, sinks[str(r.PODS)])
    tasks = [asyncio.create_task(i.run()) for i in (nodes, pods)]
    yield kube, store, nodes, pods
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def pod_names(store: Store) -> set[str]:
    return {p.name for p in store.pods.values()}


async def test_lists_marks_synced_then_watches(running: tuple[FakeKube, Store, Informer, Informer]) -> None:
    kube, store, nodes, pods = running
    await asyncio.wait_for(asyncio.gather(nodes.synced.wait(), pods.synced.wait()), 2)
    assert set(store.nodes) == {"node-0"}
    assert pod_names(store) == {"g-0"}

    kube.seed(r.NODES, node("node-1"))
    kube.seed(r.PODS, pod("g-1"))
    await until(lambda: pod_names(store) == {"g-0", "g-1"} and set(store.nodes) == {"node-0", "node-1"})
    assert (nodes.relists, pods.relists) == (1, 1)
    # The watch started exactly where the list left off (the seed made resourceVersion 2).
    assert [rv for rt, rv in kube.watch_opens if rt == r.PODS] == ["2"]
    assert pods.resource_version == str(kube.last_rv(r.PODS))


async def test_delete_propagates_to_the_store(running: tuple[FakeKube, Store, Informer, Informer]) -> None:
    kube, store, _, pods = running
    await asyncio.wait_for(pods.synced.wait(), 2)
    assert store.members(GangKey(NS, "g")) != []

    kube.remove(r.PODS, NS, "g-0")
    await until(lambda: not store.pods)
    assert store.members(GangKey(NS, "g")) == []


async def test_relists_on_a_410_error_event(running: tuple[FakeKube, Store, Informer, Informer]) -> None:
    kube, store, _, pods = running
    await asyncio.wait_for(pods.synced.wait(), 2)
    kube.expire_watches(r.PODS)
    await until(lambda: pods.relists == 2)
    kube.seed(r.PODS, pod("g-1"))
    await until(lambda: pod_names(store) == {"g-0", "g-1"})


async def test_relists_on_a_410_answer_and_catches_up_on_what_it_missed(
    running: tuple[FakeKube, Store, Informer, Informer],
) -> None:
    kube, store, _, pods = running
    await asyncio.wait_for(pods.synced.wait(), 2)
    before = len(kube.watch_opens)
    kube.end_watches(r.PODS)
    # While the watch is closed: a pod comes, a pod goes, and etcd compacts past our resourceVersion.
    kube.seed(r.PODS, pod("g-1"))
    kube.remove(r.PODS, NS, "g-0")
    kube.compact()

    await until(lambda: pods.relists == 2, timeout=4)
    await until(lambda: pod_names(store) == {"g-1"})
    assert len(kube.watch_opens) >= before + 2  # the refused resume, then the fresh watch


async def test_reopens_after_a_server_side_end_without_relisting(
    running: tuple[FakeKube, Store, Informer, Informer],
) -> None:
    kube, store, _, pods = running
    await asyncio.wait_for(pods.synced.wait(), 2)
    seen = pods.resource_version
    kube.end_watches(r.PODS)
    kube.seed(r.PODS, pod("g-1"))  # happens while no watch is open

    await until(lambda: pod_names(store) == {"g-0", "g-1"}, timeout=4)
    assert pods.relists == 1
    assert kube.watch_opens[-1] == (r.PODS, seen)


async def test_a_bookmark_advances_the_resource_version_only(
    running: tuple[FakeKube, Store, Informer, Informer],
) -> None:
    kube, store, _, pods = running
    await asyncio.wait_for(pods.synced.wait(), 2)
    kube.seed(r.NODES, node("node-1"))  # moves the global resourceVersion, not the pods'
    kube.bookmark(r.PODS)
    await until(lambda: pods.resource_version == str(kube.last_rv(r.NODES)))
    assert pod_names(store) == {"g-0"}


async def test_a_dead_stream_is_reopened_after_the_inactivity_timeout() -> None:
    kube = FakeKube()
    store = Store()
    informer = Informer(kube, r.NODES, sinks_for(store, ())[str(r.NODES)], inactivity_timeout_seconds=0.05)
    task = asyncio.create_task(informer.run())
    try:
        await until(lambda: sum(1 for rt, _ in kube.watch_opens if rt == r.NODES) >= 2, timeout=4)
        assert informer.relists == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_failing_list_is_retried() -> None:
    kube = FakeKube()
    kube.seed(r.NODES, node("node-0"))
    kube.fail("list", rt=r.NODES)
    store = Store()
    informer = Informer(kube, r.NODES, sinks_for(store, ())[str(r.NODES)])
    task = asyncio.create_task(informer.run())
    try:
        assert not informer.synced.is_set()
        await asyncio.wait_for(informer.synced.wait(), 4)
        assert set(store.nodes) == {"node-0"}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class _BusyStream:
    """A kube whose node watch delivers whatever is put in ``events``, the moment it is put."""

    def __init__(self) -> None:
        self.events: asyncio.Queue[dict[str, object]] = asyncio.Queue()

    async def list(self, rt: object) -> tuple[list[dict[str, object]], str]:
        return [], "1"

    async def watch(
        self, rt: object, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[dict[str, object]]:
        while True:
            yield await self.events.get()


@pytest.mark.parametrize("ticks", range(4))
async def test_a_cancel_that_meets_an_arriving_event_still_stops_the_informer(ticks: int) -> None:
    # A busy stream (the pods of a gang being admitted) delivers an event in the very tick the
    # process is told to stop: the cancellation must win, or SIGTERM leaves the process running
    # (Python 3.11's asyncio.wait_for returned the event and dropped the cancellation).
    kube = _BusyStream()
    informer = Informer(kube, r.NODES, sinks_for(Store(), ())[str(r.NODES)])  # type: ignore[arg-type]
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 2)
    for _ in range(3):
        await asyncio.sleep(0)
    kube.events.put_nowait({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "2"}}})
    for _ in range(ticks):
        await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert done == {task}, "the informer kept running after it was cancelled"
    assert task.cancelled()


class PickySink:
    """A sink whose reader fails on objects named "odd-*" (as a record reader might on a value a
    tenant wrote that nobody foresaw)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def _read(self, obj: dict[str, object]) -> str:
        name = str((obj.get("metadata") or {}).get("name"))  # type: ignore[union-attr]
        if name.startswith("odd-"):
            raise ValueError(f"cannot read {name}")
        return name

    def replace(self, items: list[dict[str, object]]) -> None:
        self.names = {self._read(item) for item in items}

    def upsert(self, obj: dict[str, object]) -> None:
        self.names.add(self._read(obj))

    def delete(self, obj: dict[str, object]) -> None:
        self.names.discard(self._read(obj))


async def test_an_object_no_reader_understands_is_skipped_and_the_rest_syncs_and_streams() -> None:
    kube = FakeKube()
    kube.seed(r.PODS, pod("g-0"), pod("odd-0"), pod("g-1"))
    sink = PickySink()
    informer = Informer(kube, r.PODS, sink)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 2)
        assert sink.names == {"g-0", "g-1"}
        opens = len(kube.watch_opens)
        kube.seed(r.PODS, pod("odd-1"))
        kube.seed(r.PODS, pod("g-2"))
        await until(lambda: "g-2" in sink.names)
        assert sink.names == {"g-0", "g-1", "g-2"}
        assert len(kube.watch_opens) == opens  # the odd object in the stream did not end the watch
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_relist_with_an_unreadable_podgroup_still_forgets_the_ones_deleted_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube = FakeKube()
    kube.seed(r.PODGROUPS, podgroup("gone"), podgroup("kept"))
    store = Store()
    informer = Informer(kube, r.PODGROUPS, sinks_for(store, r.PODGROUP_TYPES)[str(r.PODGROUPS)])
    await informer._list()
    gone = GangKey(NS, "gone")
    store.assume_admission(gone, AdmissionRecord(at=1.0, placement={"old-pod-uid": "node-0"}))
    # While no watch runs: "gone" is deleted, and a PodGroup no reader understands appears.
    kube.remove(r.PODGROUPS, NS, "gone")
    kube.seed(r.PODGROUPS, podgroup("odd"))
    real = records.podgroup_record

    def picky(rt: r.ResourceType, raw: dict[str, object]) -> object:
        if (raw.get("metadata") or {}).get("name") == "odd":  # type: ignore[union-attr]
            raise ValueError("cannot read odd")
        return real(rt, raw)

    monkeypatch.setattr(records, "podgroup_record", picky)
    await informer._list()
    assert {key.name for key in store.podgroups[r.PODGROUPS]} == {"kept"}
    # Re-created under the same name (a Job run again), it does not inherit the old admission.
    assert store.assumed_admission(gone) is None
