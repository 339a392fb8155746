"""A gang follows its workload when that is scaled: the PodGroup Phalanx made is re-sized from the
workload's spec (watched), before and after admission; the members a scale-up adds start together;
a scaled-up gang waiting for them is not degraded; a user's own PodGroup is never re-sized."""

from __future__ import annotations

from controller.api import resources as r
from shared import constants as c
from tests import builders
from tests.component.controller.harness import JOB, NS, Harness, bind, gang, gates_of, pod, podgroup


def scale(h: Harness, parallelism: int) -> None:
    def change(obj: dict[str, object]) -> None:
        obj["spec"] = {"parallelism": parallelism, "completions": parallelism}

    h.kube.mutate(r.JOBS, NS, "train", change)


def min_member(h: Harness) -> int:
    pg = h.pg()
    assert pg is not None
    return int(pg["spec"]["minMember"])


async def run_three(h: Harness) -> None:
    """A 3-pod Job admitted and running on node-0 (4 GPUs; node-1 has 4 more)."""
    h.kube.seed(r.JOBS, builders.job(JOB["name"]).namespace(NS).uid(JOB["uid"]).parallelism(3).build())
    h.kube.seed(r.PODS, *gang(3))
    await h.step()
    await h.step()
    assert min_member(h) == 3
    for i in range(3):
        assert gates_of(h.pod(f"g-{i}")) == []
        bind(h.kube, f"g-{i}", str(h.pin(f"g-{i}")), phase="Running")
    await h.step()


async def test_a_waiting_gang_scaled_down_is_re_sized_and_starts(h: Harness) -> None:
    # 10 one-GPU pods never fit on two 4-GPU nodes; the user scales the Job down to 6.
    h.kube.seed(r.JOBS, builders.job(JOB["name"]).namespace(NS).uid(JOB["uid"]).parallelism(10).build())
    h.kube.seed(r.PODS, *gang(10))
    await h.step()
    await h.step()
    assert min_member(h) == 10
    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(10))

    scale(h, 6)
    for i in range(6, 10):
        h.kube.remove(r.PODS, NS, f"g-{i}")  # what the Job controller does
    await h.step()
    await h.step()

    assert min_member(h) == 6
    pg = h.pg()
    assert pg is not None
    assert pg["metadata"]["annotations"]["phalanx.io/min-member-source"] == "the workload spec"
    assert all(gates_of(h.pod(f"g-{i}")) == [] for i in range(6))


async def test_members_a_scale_up_adds_start_together_and_the_gang_is_not_degraded(h: Harness) -> None:
    h.reconciler.degraded_timeout = 60.0
    await run_three(h)
    # Scaled to 6: three more pods, carrying the size the template had at creation (3). Room for
    # one more on node-0 and four on node-1, so all three start, together.
    scale(h, 6)
    h.kube.seed(r.PODS, *(pod(f"g-{i}", min_member=3) for i in range(3, 6)))
    await h.step()
    await h.step()
    assert min_member(h) == 6
    assert all(gates_of(h.pod(f"g-{i}")) == [] for i in range(3, 6))


async def test_a_scale_up_that_does_not_fit_waits_whole_and_says_why(h: Harness) -> None:
    h.reconciler.degraded_timeout = 60.0
    await run_three(h)
    scale(h, 9)  # six more, room for five
    h.kube.seed(r.PODS, *(pod(f"g-{i}", min_member=3) for i in range(3, 9)))
    await h.step()
    await h.step()

    assert min_member(h) == 9
    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(3, 9))
    pg = h.pg()
    assert pg is not None
    status = pg["status"]
    assert (status["phase"], status["reason"]) == ("Running", "InsufficientCapacity")
    assert status["message"].startswith("3 members running; 6 more members needed to reach 9 wait to start")
    admitted = next(cond for cond in status["conditions"] if cond["type"] == "Admitted")
    assert admitted["status"] == "True"

    # Long past the degraded timeout: nothing of it was lost, so it is not re-queued; it keeps
    # running at its old size and its new members keep waiting.
    h.clock.advance(600)
    await h.step()
    assert all(h.pod(f"g-{i}") is not None and gates_of(h.pod(f"g-{i}")) == [] for i in range(3))
    pg = h.pg()
    assert pg is not None
    assert pg["status"]["phase"] == "Running"
    assert all(cond["type"] != "Degraded" for cond in pg["status"]["conditions"])
    assert "Waiting" in h.event_reasons()


async def test_a_user_podgroup_is_never_re_sized(h: Harness) -> None:
    h.kube.seed(r.PODGROUPS, podgroup(min_member=4))
    h.kube.seed(r.JOBS, builders.job(JOB["name"]).namespace(NS).uid(JOB["uid"]).parallelism(4).build())
    h.kube.seed(r.PODS, *gang(4))
    await h.step()
    scale(h, 2)
    await h.step()
    assert min_member(h) == 4
    assert all("minMember" not in (w.body.get("spec") or {}) for w in h.kube.writes_to(r.PODGROUPS, "patch"))
