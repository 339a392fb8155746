"""When bench-peers stops watching a scenario, and which pods each gang's figures come from."""

from __future__ import annotations

from tests.bench.peers.runner import Watched, _done
from tests.bench.peers.scenarios import Arrival, Scenario
from tests.bench.peers.timeline import GangRecord, PodRecord
from tests.localcluster.fleet import FleetSpec


def scenario() -> Scenario:
    arrivals = (Arrival(0.0, "a", 1, 1, 5.0), Arrival(0.0, "b", 1, 1, 5.0))
    return Scenario("s", "s", FleetSpec(gpu_nodes=1), arrivals, timeout_s=10.0)


def test_a_gang_that_never_completes_does_not_hide_the_pods_of_later_gangs() -> None:
    gangs = {name: GangRecord(name, 1, 1, submitted=0.0) for name in ("a", "b")}
    seen = Watched()
    seen.pods["pa"] = PodRecord("a", 1, bound=1.0, finished=2.0, succeeded=False)  # evicted, gone
    seen.pods["pb"] = PodRecord("b", 1, bound=1.0, finished=6.0, succeeded=True)
    assert not _done(scenario(), gangs, seen, now=7.0)
    assert [p.succeeded for p in gangs["b"].pods] == [True]
    assert gangs["b"].completed()


def test_done_once_every_gang_has_completed() -> None:
    gangs = {name: GangRecord(name, 1, 1, submitted=0.0) for name in ("a", "b")}
    seen = Watched()
    for name in ("a", "b"):
        seen.pods[f"p{name}"] = PodRecord(name, 1, bound=1.0, finished=6.0, succeeded=True)
    assert _done(scenario(), gangs, seen, now=7.0)
    # Not before every arrival has been submitted.
    assert not _done(scenario(), {"a": gangs["a"]}, seen, now=7.0)
