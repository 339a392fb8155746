"""Informer sinks for queues: Queue objects of both kinds, and namespace labels naming a default
queue (the namespace sink feeds the store as before, and the queue registry beside it)."""

from __future__ import annotations

from collections.abc import Iterable

from controller.api import resources
from controller.api.resources import ResourceType
from controller.api.store import Store, StoreSink
from shared.jsonread import JsonObject


def queue_sinks(
    store: Store, types: Iterable[ResourceType], namespaces: StoreSink | None
) -> dict[str, StoreSink]:
    sinks: dict[str, StoreSink] = {}
    for rt in types:
        if rt in resources.QUEUE_TYPES:
            sinks[str(rt)] = StoreSink(
                lambda raw, rt=rt: store.upsert_queue(rt, raw),  # type: ignore[misc]
                lambda raw, rt=rt: store.delete_queue(rt, raw),  # type: ignore[misc]
                lambda items, rt=rt: store.replace_queues(rt, items),  # type: ignore[misc]
            )
    if namespaces is not None:
        inner = namespaces

        def upsert(raw: JsonObject) -> None:
            inner.upsert(raw)
            store.upsert_namespace_queues(raw)

        def delete(raw: JsonObject) -> None:
            inner.delete(raw)
            store.delete_namespace_queues(raw)

        def replace(items: list[JsonObject]) -> None:
            inner.replace(items)
            store.replace_namespace_queues(items)

        sinks[str(resources.NAMESPACES)] = StoreSink(upsert, delete, replace)
    return sinks
