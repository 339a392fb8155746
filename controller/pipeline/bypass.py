"""Report gang members that run without Phalanx's admission (docs/operations.md, "Security").

The API server refuses anyone but the controller removing the ``phalanx.io/gang`` gate (the
``phalanx-gang-gate`` admission policy). Where that policy is missing (not installed, an older
cluster, removed by an admin) or a member never had the gate, a member can bind while its gang was
never admitted: a partial gang holding its GPUs. Phalanx cannot undo a binding, so it says so -- a
Warning Event ``GateBypassed`` on the pod and on its PodGroup, and a counter -- once per pod.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from controller.core import EventReason, GangKey, Pod
from controller.core import messages as msg
from controller.pipeline.events import EventRecorder
from controller.pipeline.gangs import GangView
from controller.pipeline.metrics import ControllerMetrics
from shared import constants

log = logging.getLogger(__name__)
REASON = EventReason.GATE_BYPASSED


def bypassed(view: GangView, ever_admitted: set[str]) -> list[Pod]:
    """Members bound on a node although no admission of their gang holds them."""
    return [
        pod
        for pod in view.members
        if pod.bound
        and not pod.finished
        and not pod.terminating
        and pod.uid not in view.gang.admitted
        and pod.uid not in ever_admitted  # e.g. a bare pod a rollback left running
        and constants.SKIP not in pod.labels  # opted out of gang scheduling on purpose
        and pod.annotations.get(constants.SKIP) != "true"
    ]


class GateBypassDetector:
    def __init__(self, events: EventRecorder, metrics: ControllerMetrics) -> None:
        self.events = events
        self.counter = metrics.gate_bypassed
        self._ever_admitted: set[str] = set()  # every uid seen in an admission record
        self._reported: set[str] = set()

    async def check(self, views: Mapping[GangKey, GangView]) -> None:
        live: set[str] = set()
        for view in views.values():
            self._ever_admitted.update(view.gang.admitted)
            live.update(p.uid for p in view.members)
            found = [p for p in bypassed(view, self._ever_admitted) if p.uid not in self._reported]
            if found:
                await self._report(view, found)
        # Forget pods that are gone, so these sets stay as small as the cluster.
        self._ever_admitted &= live
        self._reported &= live

    async def _report(self, view: GangView, pods: list[Pod]) -> None:
        self._reported.update(p.uid for p in pods)
        self.counter.inc(len(pods))
        gang = view.gang
        ever = gang.admitted_at is not None
        names = sorted(p.name for p in pods)
        message = msg.gate_bypassed(names, ever, gang.min_member, constants.GATE)
        log.warning("gate bypassed", extra={"gang": str(gang.key), "pods": names})
        await self.events.emit(view.podgroup, REASON, message, warning=True)
        for pod in pods:
            said = msg.gate_bypassed_pod(pod.node_name, gang.key.name, ever, constants.GATE)
            await self.events.emit_on_pod(pod, REASON, said, warning=True)
