"""Preemption and reclaim for a sliced gang: victims are chosen so that every slice fits inside one
domain of its level, not for GPUs scattered where no slice fits."""

from __future__ import annotations

from collections.abc import Sequence

from controller.core import PlannerConfig, plan
from controller.core.config import NVLINK_LABEL
from controller.core.model import GangKey, Preempt

from .builders import NOW, GangBuilder, NodeLike, gang, node, pod, queue, snapshot

G = GangKey("ns", "g")
CONFIG = PlannerConfig(starvation_age_seconds=None, preemption_min_runtime_seconds=0.0)


def cliques(count: int) -> list[NodeLike]:
    """``count`` NVLink domains c0, c1, ... of two 4-GPU nodes each: n0 and n1 in c0, ..."""
    return [node(f"n{k}").gpus(4).label(NVLINK_LABEL, f"c{k // 2}") for k in range(2 * count)]


def running(name: str, nodes: Sequence[str], started: float, q: str | None = None) -> GangBuilder:
    return (
        gang(name)
        .queue(q)
        .min(len(nodes))
        .priority(0)
        .created(started)
        .running_members(nodes, gpus=4, started=started)
        .admitted({f"ns/{name}-{k}": n for k, n in enumerate(nodes)})
    )


def sliced(priority: int, q: str | None = None) -> GangBuilder:
    """2 slices of 2 pods × 4 GPUs: each slice is one whole NVLink domain."""
    return (
        gang("g")
        .queue(q)
        .min(4)
        .priority(priority)
        .created(NOW - 10)
        .gated_members(4, gpus=4)
        .topology(slice_key=NVLINK_LABEL, slice_size=2)
    )


def slices_of(decision: Preempt, nodes: Sequence[NodeLike]) -> list[set[str]]:
    """The NVLink domains each slice (members 0-1, 2-3) is placed in."""
    built = {n.build().name: n.build() for n in nodes if not isinstance(n, str)}  # type: ignore[union-attr]
    by_member = sorted(decision.placement.items(), key=lambda item: int(item[0].rsplit("-", 1)[1]))
    domains = [built[str(where)].labels[NVLINK_LABEL] for _, where in by_member]
    return [set(domains[k : k + 2]) for k in range(0, len(domains), 2)]


def victims(decision: object) -> list[str]:
    assert isinstance(decision, Preempt), decision
    return sorted(v.gang.name for v in decision.victims if v.gang is not None)


def test_preemption_frees_whole_domains_for_the_slices() -> None:
    # c0 and c1 each hold one pod of higher priority (n1, n3) and one cheap victim (p on n0, q on
    # n2); c2 and c3 are held by two-pod gangs (8 GPUs each, dearer). Evicting p, q and one pair
    # frees 16 GPUs, but in three domains no slice fits whole: only the two pairs make room.
    nodes = cliques(4)
    keep = [pod(f"keep-{n}").ns("other").gpus(4).priority(1000).on(n) for n in ("n1", "n3")]
    gangs = [
        sliced(priority=100),
        running("p", ["n0"], NOW - 100),
        running("q", ["n2"], NOW - 100),
        running("pair", ["n4", "n5"], NOW - 1000),
        running("pair2", ["n6", "n7"], NOW - 1000),
    ]
    decision = plan(snapshot(nodes, gangs, keep), CONFIG).for_gang(G)
    assert victims(decision) == ["pair", "pair2"]
    assert isinstance(decision, Preempt)
    assert [len(domains) for domains in slices_of(decision, nodes)] == [1, 1]


def test_reclaim_takes_back_whole_domains_for_the_slices() -> None:
    # Team a (quota 8) runs a one-pod gang on each of the 8 nodes; the youngest, reclaimed first,
    # sit one per domain. Team b's sliced gang (16 GPUs, within b's quota) needs two whole domains.
    nodes = cliques(4)
    queues = [queue("a", gpu=(8, None, 1)), queue("b", gpu=(24, None, 1))]
    young = {0, 2, 4, 6}
    gangs = [
        sliced(priority=0, q="b"),
        *(running(f"a{k}", [f"n{k}"], NOW - (100 if k in young else 1000) - k, q="a") for k in range(8)),
    ]
    decision = plan(snapshot(nodes, gangs, queues=queues), CONFIG).for_gang(G)
    assert isinstance(decision, Preempt) and decision.reclaimed_from == ("a",), decision
    taken = victims(decision)
    assert len(taken) == 4
    assert [len(domains) for domains in slices_of(decision, nodes)] == [1, 1]
    # The victims are the two domains the slices go to, not the four youngest gangs.
    assert {f"c{int(name[1:]) // 2}" for name in taken} == set().union(*slices_of(decision, nodes))
