"""Queue objects and namespace queue labels reach the store through its API, and a change that can
move gangs' order tells the store's subscribers to replan every gang (``None``)."""

from __future__ import annotations

from typing import Any

from controller.api import resources as r
from controller.api.store import Store
from controller.core import GangKey
from controller.runtime.wiring import WATCHED, informer_sinks
from shared import constants


def queue(name: str, gpus: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"resources": {constants.GPU_RESOURCE: {"quota": gpus}}}}


def namespace(name: str, queue_name: str | None) -> dict[str, Any]:
    labels = {constants.QUEUE_LABEL: queue_name} if queue_name else {}
    return {"metadata": {"name": name, "labels": labels}}


def test_a_queue_or_grant_change_replans_every_gang_and_a_repeat_does_not() -> None:
    store = Store()
    heard: list[GangKey | None] = []
    store.subscribe(heard.append)
    sinks = informer_sinks(store, WATCHED)
    queues, namespaces = sinks[str(r.QUEUES)], sinks[str(r.NAMESPACES)]

    queues.upsert(queue("team-a", "8"))
    assert heard == [None] and store.queues.queues()["team-a"].resources[constants.GPU_RESOURCE].quota == 8
    queues.upsert(queue("team-a", "8"))  # the same again (a resync): nothing moves
    assert heard == [None]
    queues.upsert(queue("team-a", "4"))
    assert heard == [None, None]

    heard.clear()
    namespaces.upsert(namespace("team", "team-a"))
    assert None in heard and store.queues.namespace_queue == {"team": "team-a"}
    heard.clear()
    namespaces.upsert(namespace("team", "team-a"))
    assert None not in heard  # the namespace sink may speak for itself; the queue registry did not change
    queues.delete(queue("team-a", "4"))
    assert heard[-1] is None and "team-a" not in store.queues.queues()
