"""Queues as the controller sees them: Phalanx's and KAI's Queue objects, parsed into the core's
``Queue`` records, each namespace's default queue, and which queue a gang belongs to.

Pure (no I/O): the informers feed ``QueueRegistry``; ``gang_queue`` reads it.

Which queue a gang belongs to, first found wins:

1. the PodGroup's ``spec.queue`` (KAI, Volcano), then its ``phalanx.io/queue`` label;
2. a KAI child group without one takes its ``parentPodGroup``'s;
3. its members' labels ``phalanx.io/queue``, ``runai/queue``, ``kueue.x-k8s.io/queue-name`` (on
   the pod template; the webhook copies a workload's own label there as ``phalanx.io/queue``);
4. the namespace's label ``phalanx.io/queue`` (its default queue).

Which queues a namespace may use (``grants``) is the platform engineer's to say, on the namespace
(tenants cannot label their namespace): the queue its ``phalanx.io/queue`` label binds it to and
those its ``phalanx.io/allowed-queues`` annotation lists; the core decides what that permits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.api.resources import QUEUES, QUEUES_KAI, ResourceType
from controller.core import Pod, Queue, QueueGrant, QueueResource
from shared import constants
from shared.jsonread import JsonObject, name_of
from shared.quantities import QuantityError, to_int
from shared.queue import QueueSpec

log = logging.getLogger(__name__)

KAI_MEGABYTE = 1_000_000  # KAI's Queue gives memory in MB


@dataclass(frozen=True, slots=True)
class QueueRecord:
    rt: ResourceType
    name: str
    queue: Queue
    status: dict[str, Any]
    problem: str | None = None  # a spec field that could not be read (the queue keeps the rest)


def _weight(value: object) -> float:
    try:
        weight = float(str(value))
    except ValueError:
        return 1.0
    return weight if weight >= 0 else 1.0


def phalanx_queue(raw: JsonObject) -> QueueRecord:
    name = name_of(raw)
    spec = QueueSpec.from_json(raw.get("spec"))
    resources: dict[str, QueueResource] = {}
    problems = []
    for resource, given in spec.resources.items():
        try:
            quota = to_int(resource, given.quota or 0)
            limit = None if given.limit is None else to_int(resource, given.limit)
        except (QuantityError, ValueError) as err:
            problems.append(f"{resource}: {err}")
            continue
        resources[resource] = QueueResource(
            max(0, quota),
            None if limit is None or limit < 0 else limit,
            _weight(given.over_quota_weight),
        )
    queue = Queue(name, spec.parent, resources)
    return QueueRecord(QUEUES, name, queue, dict(raw.get("status") or {}), "; ".join(problems) or None)


def _kai_amount(value: object, scale: float) -> int | None:
    """A KAI amount (a number; -1 or absent: none) in Phalanx's units."""
    try:
        number = float(str(value))
    except ValueError:
        return None
    return None if number < 0 else int(number * scale)


def kai_queue(raw: JsonObject, gpu_resource: str = constants.GPU_RESOURCE) -> QueueRecord:
    """KAI's scheduling.run.ai/v2 Queue: gpu in units, cpu in millicores, memory in MB."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    name = str(meta.get("name", ""))
    resources: dict[str, QueueResource] = {}
    for kai_name, resource, scale in (
        ("gpu", gpu_resource, 1.0),
        ("cpu", "cpu", 1.0),
        ("memory", "memory", float(KAI_MEGABYTE)),
    ):
        body = (spec.get("resources") or {}).get(kai_name)
        if not isinstance(body, Mapping):
            continue
        quota = _kai_amount(body.get("quota", 0), scale)
        limit = _kai_amount(body.get("limit", -1), scale)
        if quota is None and limit is None:
            continue  # -1 and -1: the queue says nothing about this resource
        resources[resource] = QueueResource(quota or 0, limit, _weight(body.get("overQuotaWeight", 1)))
    queue = Queue(name, str(spec.get("parentQueue") or "") or None, resources)
    return QueueRecord(QUEUES_KAI, name, queue, dict(raw.get("status") or {}))


PARSERS: dict[ResourceType, Callable[[JsonObject], QueueRecord]] = {
    QUEUES: phalanx_queue,
    QUEUES_KAI: kai_queue,
}


@dataclass
class QueueRegistry:
    """Queues of both kinds (Phalanx's wins where both name the same queue) and namespace defaults."""

    by_kind: dict[ResourceType, dict[str, QueueRecord]] = field(
        default_factory=lambda: {rt: {} for rt in PARSERS}
    )
    namespace_queue: dict[str, str] = field(default_factory=dict)
    # Namespace -> the queues its allowed-queues annotation grants (only namespaces that have one).
    namespace_allowed: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def records(self) -> dict[str, QueueRecord]:
        out: dict[str, QueueRecord] = {}
        for rt in reversed(list(PARSERS)):  # KAI's first, then Phalanx's over it
            out.update(self.by_kind[rt])
        return out

    def queues(self) -> dict[str, Queue]:
        return {name: record.queue for name, record in sorted(self.records().items())}

    # ---- informer feed (True: something changed) ------------------------------------------------

    def upsert(self, rt: ResourceType, raw: JsonObject) -> bool:
        record = PARSERS[rt](raw)
        old = self.by_kind[rt].get(record.name)
        self.by_kind[rt][record.name] = record
        if record.problem:
            log.warning("queue spec partly unreadable", extra={"queue": record.name, "error": record.problem})
        return old is None or old.queue != record.queue

    def delete(self, rt: ResourceType, raw: JsonObject) -> bool:
        return self.by_kind[rt].pop(str((raw.get("metadata") or {}).get("name", "")), None) is not None

    def replace(self, rt: ResourceType, items: Iterable[JsonObject]) -> bool:
        self.by_kind[rt] = {}
        for raw in items:
            self.upsert(rt, raw)
        return True

    def upsert_namespace(self, raw: JsonObject) -> bool:
        meta = raw.get("metadata") or {}
        name = str(meta.get("name", ""))
        queue = str((meta.get("labels") or {}).get(constants.QUEUE_LABEL, "")) or None
        allowed = allowed_queues((meta.get("annotations") or {}).get(constants.ALLOWED_QUEUES_ANNOTATION))
        if self.namespace_queue.get(name) == queue and self.namespace_allowed.get(name) == allowed:
            return False
        self.namespace_queue.pop(name, None)
        self.namespace_allowed.pop(name, None)
        if queue is not None:
            self.namespace_queue[name] = queue
        if allowed is not None:
            self.namespace_allowed[name] = allowed
        return True

    def delete_namespace(self, raw: JsonObject) -> bool:
        name = str((raw.get("metadata") or {}).get("name", ""))
        allowed = self.namespace_allowed.pop(name, None)
        return self.namespace_queue.pop(name, None) is not None or allowed is not None

    def replace_namespaces(self, items: Iterable[JsonObject]) -> bool:
        self.namespace_queue = {}
        self.namespace_allowed = {}
        for raw in items:
            self.upsert_namespace(raw)
        return True

    def grants(self) -> dict[str, QueueGrant]:
        """Namespace -> the queues granted to it, for the core."""
        names = sorted(set(self.namespace_queue) | set(self.namespace_allowed))
        return {
            ns: QueueGrant(self.namespace_queue.get(ns), self.namespace_allowed.get(ns, ())) for ns in names
        }


def allowed_queues(value: object) -> tuple[str, ...] | None:
    """The queues an allowed-queues annotation lists (comma-separated, in order), or None."""
    names = tuple(dict.fromkeys(q.strip() for q in str(value or "").split(",") if q.strip()))
    return names or None


def _linked(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    for key in constants.QUEUE_LINK_LABELS:
        if labels.get(key):
            return labels[key]
    return annotations.get(constants.QUEUE_LABEL) or None


def member_queue(members: Iterable[Pod]) -> str | None:
    """The queue the members name (the first by name where they disagree)."""
    named = sorted({q for p in members if (q := _linked(p.labels, p.annotations))})
    return named[0] if named else None


def gang_queue(
    spec_queue: str | None,
    labels: Mapping[str, str],
    members: Iterable[Pod],
    namespace_default: str | None,
    parent_queue: str | None = None,
) -> str | None:
    """Which queue a gang belongs to (see the module doc); None: no queue."""
    own = spec_queue or labels.get(constants.QUEUE_LABEL)
    return own or parent_queue or member_queue(members) or namespace_default or None
