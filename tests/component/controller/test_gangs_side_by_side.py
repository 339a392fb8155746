"""Gangs admitted in one pass are carried out side by side, each still recorded before any of its
gates is lifted: one after another, a burst of small gangs waited on two round trips per gang."""

from __future__ import annotations

import asyncio
from typing import Any

from controller.api import resources as r
from shared import constants as c

from .harness import NS, Harness, gang, gates_of


async def test_two_gangs_admitted_together_are_written_side_by_side_each_record_first() -> None:
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    h.kube.seed(r.PODS, *gang(2, group="a", gpus=1), *gang(2, group="b", gpus=1))
    original = h.kube.patch
    in_flight: dict[str, int] = {"a": 0, "b": 0}  # writes under way, by gang
    overlapped = False
    order: list[tuple[str, str]] = []

    async def tracked(rt: Any, namespace: str | None, name: str, body: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal overlapped
        group = name[0]
        in_flight[group] += 1
        overlapped = overlapped or all(in_flight.values())
        await asyncio.sleep(0.01)  # a round trip: lets another gang's write start meanwhile
        try:
            return await original(rt, namespace, name, body, *args, **kwargs)
        finally:
            in_flight[group] -= 1
            order.append((str(rt), name))

    h.kube.patch = tracked  # type: ignore[method-assign]
    await h.step()

    assert all(not gates_of(h.pod(f"{g}-{i}")) for g in "ab" for i in range(2))
    assert overlapped  # one gang's writes were under way while the other's were
    for group in "ab":
        pg = h.kube.obj(r.PODGROUPS, NS, group)
        assert pg is not None and c.ADMISSION_ANNOTATION in pg["metadata"]["annotations"]
        recorded = order.index((str(r.PODGROUPS), group))
        lifted = [order.index((str(r.PODS), f"{group}-{i}")) for i in range(2)]
        assert recorded < min(lifted)  # its record before any of its gates
