"""Finished gangs stay out of the reconciler's passes until something about them changes.

Completed Jobs linger until deleted; before this, every pass rebuilt the view and the desired
status of each of them (most of the controller's CPU under a steady stream of small gangs).
"""

from __future__ import annotations

import pytest

from controller.api import resources as r
from controller.pipeline import gangs
from tests.component.controller.harness import Harness, bind, gang, gates_of, pod


async def finished(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(2, min_member=2))
    await h.step()
    for i in range(2):
        bind(h.kube, f"g-{i}", "node-0", phase="Succeeded")
    await h.step()
    await h.step()
    assert h.pg()["status"]["phase"] == "Finished"  # type: ignore[index]


def in_pass(h: Harness) -> set[str]:
    _, views = gangs.snapshot(h.store, h.clock(), skip_settled=True)
    return {key.name for key in views}


async def test_a_finished_gang_is_left_out_of_the_pass_and_its_status_kept(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    await finished(h)
    viewed: list[str] = []
    real_view = gangs.view
    monkeypatch.setattr(
        gangs, "view", lambda record, *args: viewed.append(record.key.name) or real_view(record, *args)
    )
    h.clock.advance(1)
    await h.step()  # the reconciler's own pass
    assert viewed == []
    monkeypatch.undo()
    h.sync()
    assert in_pass(h) == set()
    # ... while the CLI's full snapshot still shows it.
    assert {k.name for k in gangs.snapshot(h.store, h.clock())[1]} == {"g"}
    writes = len(h.kube.writes_to(r.PODGROUPS, "patch"))
    h.clock.advance(600)
    await h.step()
    assert len(h.kube.writes_to(r.PODGROUPS, "patch")) == writes
    assert h.pg()["status"]["phase"] == "Finished"  # type: ignore[index]


async def test_a_new_member_brings_a_finished_gang_back_into_the_pass(h: Harness) -> None:
    await finished(h)
    h.kube.seed(r.PODS, pod("g-2", min_member=2))  # the Job retried, or was scaled
    await h.step()
    h.sync()
    assert in_pass(h) == {"g"}
    # Planned again: a lone new member of a gang of 2 forms it again, whole, so it waits, gated,
    # and the PodGroup no longer says Finished.
    assert gates_of(h.pod("g-2")) == ["phalanx.io/gang"]
    status = h.pg()["status"]  # type: ignore[index]
    assert (status["phase"], status["reason"]) == ("Pending", "WaitingForMembers"), status
