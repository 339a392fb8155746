"""Write each queue's status (allocated, requested, fair share, gangs) and its metrics after a pass.

Only what changed is written (one merge patch of ``status`` per queue); a queue of either kind
(Phalanx's or KAI's) gets the same fields.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from controller.api.kube import ApiError, Kube
from controller.api.store import Store
from controller.core import Decision, Plan, Preempt, Queue, QueueReport, QueueTree
from controller.pipeline.metrics import ControllerMetrics
from shared import constants
from shared.quantities import base_units, format_amount
from shared.queue import QueueStatus

log = logging.getLogger(__name__)


def amount_text(resource: str, amount: float) -> str:
    """A status amount: whole units as a quantity ("8", "4Gi", "1500m"), a fair share of a
    countable resource with two decimals ("2.67")."""
    if float(amount).is_integer() or resource in ("cpu", "memory"):
        return format_amount(resource, round(amount))
    return f"{amount:.2f}".rstrip("0").rstrip(".")


def desired(
    report: QueueReport, queue: Queue, problem: str | None, gpu: str = constants.GPU_RESOURCE
) -> QueueStatus:
    quota = queue.resources.get(gpu)
    used = amount_text(gpu, report.allocated.get(gpu, 0))
    fair = amount_text(gpu, report.fair_share.get(gpu, 0.0))
    return QueueStatus(
        allocated={k: amount_text(k, v) for k, v in report.allocated.items()},
        requested={k: amount_text(k, v) for k, v in report.requested.items()},
        fair_share={k: amount_text(k, v) for k, v in report.fair_share.items()},
        outside_phalanx={k: amount_text(k, v) for k, v in report.outside.items()},
        admitted_gangs=report.admitted_gangs,
        waiting_gangs=report.waiting_gangs,
        summary=f"{used}/{fair}/{quota.quota if quota is not None else 0}",
        message=problem,
    )


class QueueStatusWriter:
    def __init__(self, kube: Kube, store: Store, metrics: ControllerMetrics) -> None:
        self.kube = kube
        self.store = store
        self.metrics = metrics

    async def write(self, plan: Plan, decisions: Iterable[Decision]) -> None:
        self._count_reclaims(decisions)
        records = self.store.queues.records()
        self._gauges(plan.queues, records)  # also clears them once the last queue is gone
        if not plan.queues:
            return
        broken = QueueTree({name: rec.queue for name, rec in records.items()}).broken
        for name, report in plan.queues.items():
            record = records.get(name)
            if record is None:
                continue
            wanted = desired(report, record.queue, broken.get(name)).to_json()
            current = record.status
            if all(current.get(k) == v for k, v in wanted.items()):
                continue
            try:
                await self.kube.patch(record.rt, None, name, {"status": wanted}, subresource="status")
            except ApiError as err:
                if not err.not_found:
                    log.warning("queue status not written", extra={"queue": name, "error": str(err)})
                continue
            for key, value in wanted.items():  # no rewrite before the informer catches up
                if value is None:
                    current.pop(key, None)
                else:
                    current[key] = value

    def _count_reclaims(self, decisions: Iterable[Decision]) -> None:
        for decision in decisions:
            if isinstance(decision, Preempt):
                for queue in decision.reclaimed_from:
                    self.metrics.queue_reclaims.labels(queue=queue).inc()

    def _gauges(self, reports: Mapping[str, QueueReport], records: Mapping[str, Any]) -> None:
        m = self.metrics
        for gauge in (m.queue_allocated, m.queue_requested, m.queue_fair_share, m.queue_quota, m.queue_gangs):
            gauge.clear()  # deleted queues and resources vanish
        # Amounts are counted as shared/quantities counts them (cpu in millicores); metrics are in
        # base units (cpu in cores), as Prometheus' conventions and kube-state-metrics have them.
        for name, report in reports.items():
            for resource, value in report.allocated.items():
                m.queue_allocated.labels(queue=name, resource=resource).set(base_units(resource, value))
            for resource, value in report.requested.items():
                m.queue_requested.labels(queue=name, resource=resource).set(base_units(resource, value))
            for resource, share in report.fair_share.items():
                m.queue_fair_share.labels(queue=name, resource=resource).set(base_units(resource, share))
            record = records.get(name)
            if record is not None:
                for resource, spec in record.queue.resources.items():
                    m.queue_quota.labels(queue=name, resource=resource).set(base_units(resource, spec.quota))
            m.queue_gangs.labels(queue=name, state="admitted").set(report.admitted_gangs)
            m.queue_gangs.labels(queue=name, state="waiting").set(report.waiting_gangs)
