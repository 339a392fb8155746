"""Informer sinks for queues: Queue objects of both kinds, and namespace labels naming a default
queue (the namespace sink feeds the store as before, and the queue registry beside it)."""

from __future__ import annotations

from collections.abc import Iterable

from controller.api import resources
from controller.api.kube import JSON
from controller.api.resources import ResourceType
from controller.api.store import Store, StoreSink


def _replan(store: Store, changed: bool) -> None:
    if changed:
        for listener in store.listeners:
            listener(None)  # a queue's quota or membership moves every gang's order


def queue_sinks(
    store: Store, types: Iterable[ResourceType], namespaces: StoreSink | None
) -> dict[str, StoreSink]:
    registry = store.queues
    sinks: dict[str, StoreSink] = {}
    for rt in types:
        if rt in resources.QUEUE_TYPES:
            sinks[str(rt)] = StoreSink(
                lambda raw, rt=rt: _replan(store, registry.upsert(rt, raw)),  # type: ignore[misc]
                lambda raw, rt=rt: _replan(store, registry.delete(rt, raw)),  # type: ignore[misc]
                lambda items, rt=rt: _replan(store, registry.replace(rt, items)),  # type: ignore[misc]
            )
    if namespaces is not None:
        inner = namespaces

        def upsert(raw: JSON) -> None:
            inner.upsert(raw)
            _replan(store, registry.upsert_namespace(raw))

        def delete(raw: JSON) -> None:
            inner.delete(raw)
            _replan(store, registry.delete_namespace(raw))

        def replace(items: list[JSON]) -> None:
            inner.replace(items)
            _replan(store, registry.replace_namespaces(items))

        sinks[str(resources.NAMESPACES)] = StoreSink(upsert, delete, replace)
    return sinks
