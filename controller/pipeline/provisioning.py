"""The I/O of ProvisioningRequests (--provisioning-requests): read the requests Phalanx made, carry
out what ``core.decide_provisioning`` decided (create each with its PodTemplates, delete), and tell
of what changed (Events, metrics).

The requests are listed at most every ``refresh_seconds`` (one LIST of the requests Phalanx labelled),
and while a request is unanswered or its gang consumes it the reconciler looks again that often: the
autoscaler's answers arrive on the requests, which the controller does not watch. A request the
autoscaler answered and retries by itself (CapacityNotFound), or a failed one awaiting its backoff,
is looked at every ``slow_refresh_seconds`` only.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Coroutine, Mapping
from typing import Any

from controller.api import resources as r
from controller.api.kube import ApiError, Kube
from controller.api.records import parse_time
from controller.core import (
    EventReason,
    GangKey,
    NewRequest,
    ProvisioningConfig,
    ProvisioningPlan,
    ProvisioningRequestState,
    RequestCondition,
    RequestPhase,
)
from controller.core import messages as msg
from controller.pipeline.events import EventRecorder
from controller.pipeline.gangs import GangView
from controller.pipeline.metrics import ControllerMetrics
from shared import constants

log = logging.getLogger(__name__)

# Fields of a member's spec a PodTemplate must not carry: the gate (the autoscaler would see the pod
# as gated too), a node it is bound to, and what the API server resolves for pods only.
_POD_ONLY = ("schedulingGates", "nodeName", "priority", "preemptionPolicy")
_OUTCOMES = {
    RequestPhase.PROVISIONED: "provisioned",
    RequestPhase.NOT_FOUND: "not_found",
    RequestPhase.FAILED: "failed",
    RequestPhase.EXPIRED: "expired",
}
# The upstream CRD's limit on spec.podSets (maxItems): a request with more is refused, always.
MAX_POD_SETS = 32
# The CapacityRequested condition's reason of a gang whose request could not be created.
NOT_CREATED = "ProvisioningRequestNotCreated"


@dataclasses.dataclass(frozen=True, slots=True)
class NotCreated:
    """A request the plan asked for that does not exist: its name and why it was not created."""

    request: str
    why: str


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of the object's controlling owner (ownerReferences with controller: true)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return str(ref.get("uid", "")) or None
    return None


def read_request(obj: Mapping[str, Any]) -> ProvisioningRequestState | None:
    """A ProvisioningRequest Phalanx made, or None if it is not one (no gang label)."""
    meta = obj.get("metadata") or {}
    gang = (meta.get("labels") or {}).get(constants.POD_GROUP_LABEL)
    if not gang or not isinstance(gang, str):
        return None
    annotations = meta.get("annotations") or {}
    try:
        attempt = int(annotations.get(constants.PROVISIONING_ATTEMPT_ANNOTATION, "0"))
    except ValueError:
        attempt = 0
    conditions = tuple(
        RequestCondition(
            type=str(c.get("type", "")),
            status=c.get("status") == "True",
            reason=str(c.get("reason", "")),
            message=str(c.get("message", "")),
            at=parse_time(c.get("lastTransitionTime")) or 0.0,
        )
        for c in (obj.get("status") or {}).get("conditions") or []
    )
    return ProvisioningRequestState(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        gang=GangKey(str(meta.get("namespace", "")), gang),
        class_name=str((obj.get("spec") or {}).get("provisioningClassName", "")),
        signature=str(annotations.get(constants.PROVISIONING_SIGNATURE_ANNOTATION, "")),
        attempt=attempt,
        created=parse_time(meta.get("creationTimestamp")) or 0.0,
        conditions=conditions,
    )


def template_name(request: str, index: int) -> str:
    """The PodTemplate of a request's ``index``-th pod set."""
    return f"{request}-{index}"


def pod_template_spec(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A member's own spec (its requests, selectors, tolerations, affinity) for a pod set."""
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k not in _POD_ONLY}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


class Provisioner:
    def __init__(
        self,
        kube: Kube,
        config: ProvisioningConfig,
        events: EventRecorder,
        metrics: ControllerMetrics,
        clock: Callable[[], float],
        podgroup_uid: Callable[[GangKey], str | None],
        refresh_seconds: float = 2.0,
        slow_refresh_seconds: float = 30.0,
    ) -> None:
        self.kube = kube
        # A request counts as Phalanx's only when its gang's PodGroup controls it: the label alone
        # is anybody's to write (the admission policy phalanx-capacity-requests refuses that too).
        self.podgroup_uid = podgroup_uid
        self.config = config
        self.events = events
        self.metrics = metrics
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self.slow_refresh_seconds = slow_refresh_seconds
        # The gangs whose planned request the last carry_out could not create, and why.
        self.not_created: dict[GangKey, NotCreated] = {}
        # PodTemplates of deleted or half-made requests whose delete failed: deleted again each pass.
        self._leftover_templates: set[tuple[str, str]] = set()
        self._verified: set[tuple[str, str]] = set()  # requests whose templates were seen to exist
        self._requests: dict[tuple[str, str], ProvisioningRequestState] = {}
        self._template_names: dict[tuple[str, str], list[str]] = {}
        self._listed_at: float | None = None
        self._phases: dict[tuple[str, str], RequestPhase] = {}  # last phase told of, per request
        self._unserved = False

    @property
    def requests(self) -> list[ProvisioningRequestState]:
        return list(self._requests.values())

    @property
    def in_flight(self) -> bool:
        return bool(self._requests)

    async def refresh(self) -> list[ProvisioningRequestState] | None:
        """The requests Phalanx made, listed again when the last list is older than the refresh;
        None while the API server does not serve them (the autoscaler's CRD is not installed)."""
        now = self.clock()
        if self._listed_at is not None and now - self._listed_at < self.refresh_seconds:
            return self.requests
        try:
            items, _ = await self.kube.list(r.PROVISIONING_REQUESTS, label_selector=constants.POD_GROUP_LABEL)
        except ApiError as err:
            if err.not_found and not self._unserved:
                log.warning("ProvisioningRequests are not served: is the cluster-autoscaler's CRD installed?")
                self._unserved = True
            if err.not_found:
                self._requests.clear()
                return None  # nothing can be asked: no request is decided, none reported as made
            return self.requests
        self._unserved = False
        self._listed_at = now
        self._requests.clear()
        self._template_names.clear()
        for item in items:
            state = read_request(item)
            if state is not None and controller_uid(item) == self.podgroup_uid(state.gang):
                key = (state.namespace, state.name)
                self._requests[key] = state
                pod_sets = (item.get("spec") or {}).get("podSets") or []
                self._template_names[key] = [
                    str((s.get("podTemplateRef") or {}).get("name", "")) for s in pod_sets
                ]
        await self._drop_requests_without_templates()
        return self.requests

    async def _drop_requests_without_templates(self) -> None:
        """A request whose PodTemplates are gone gives the autoscaler nothing to provision: it is
        deleted, and asked again next pass. Each request's templates are looked at once, the first
        time it is listed (a cleanup that raced its creation is what leaves one so)."""
        self._verified &= set(self._requests)
        for key, request in list(self._requests.items()):
            if key in self._verified:
                continue
            try:
                for name in self._template_names.get(key, []):
                    await self.kube.get(r.POD_TEMPLATES, request.namespace, name)
            except ApiError as err:
                if not err.not_found:
                    continue  # looked at again next time
                log.warning(
                    "ProvisioningRequest without its PodTemplates, deleted to be asked again",
                    extra={"gang": str(request.gang), "request": request.name},
                )
                await self._for_gang(request.gang, self._delete(request))
                continue
            self._verified.add(key)

    async def carry_out(
        self,
        plan: ProvisioningPlan,
        views: Mapping[GangKey, GangView],
        admitted: Collection[GangKey] = (),
    ) -> None:
        """Delete, create, then tell what changed; ``admitted``: gangs admitted in this pass. The
        requests planned but not created are in ``not_created`` afterwards."""
        self.not_created = {}
        await self._delete_leftover_templates()
        for gone in plan.delete:
            await self._for_gang(gone.gang, self._delete(gone))
        for new in plan.create:
            view = views.get(new.gang)
            if view is not None:
                why = await self._for_gang(new.gang, self._create(new, view))
                if why is not None:
                    self.not_created[new.gang] = NotCreated(new.name, why)
        for key, provisioning in plan.gangs.items():
            view = views.get(key)
            if view is not None and provisioning.ended is not None:
                # Replaced in this pass because it failed or its booking ended: told all the same.
                await self._tell(view, provisioning.ended, provisioning.ended_message)
            request = self._requests.get((key.namespace, provisioning.request))
            if view is None or request is None:
                continue
            if key in admitted and provisioning.consumable:
                # Admitted on the room it asked for, maybe before the autoscaler wrote Provisioned
                # (its nodes registered first): the request is told of as provisioned now.
                request = dataclasses.replace(
                    request, conditions=(RequestCondition("Provisioned", True, at=self.clock()),)
                )
                message = msg.provisioning_provisioned(request.name)
            else:
                message = provisioning.message
            await self._tell(view, request, message)
        # What was told of deleted requests is forgotten only now: a replaced one is told above.
        for gone in plan.delete:
            self._phases.pop((gone.namespace, gone.name), None)

    async def _for_gang(self, gang: GangKey, work: Coroutine[Any, Any, None]) -> str | None:
        """One gang's request work; its failure is logged and retried next pass, and the other
        gangs' requests go on (a member gone, a template the API server refuses). Returns the
        failure's message (None: done)."""
        try:
            await work
        except ApiError as err:
            log.warning("ProvisioningRequest not written", extra={"gang": str(gang), "error": str(err)})
            return err.message
        return None

    async def _delete(self, request: ProvisioningRequestState) -> None:
        key = (request.namespace, request.name)
        try:
            await self.kube.delete(r.PROVISIONING_REQUESTS, request.namespace, request.name)
        except ApiError as err:
            if not err.not_found:
                raise
        templates = self._template_names.pop(key, [])
        self._requests.pop(key, None)
        await self._delete_templates(request.namespace, templates)
        log.info("ProvisioningRequest deleted", extra={"gang": str(request.gang), "request": request.name})

    async def _delete_templates(self, namespace: str, names: Collection[str]) -> None:
        """Delete them all; one whose delete fails is kept to be deleted again next pass, and the
        first failure is raised once every other was tried."""
        first: ApiError | None = None
        for name in names:
            try:
                await self.kube.delete(r.POD_TEMPLATES, namespace, name)
            except ApiError as err:
                if not err.not_found:
                    self._leftover_templates.add((namespace, name))
                    first = first or err
                    continue
            self._leftover_templates.discard((namespace, name))
        if first is not None:
            raise first

    async def _delete_leftover_templates(self) -> None:
        for namespace, name in sorted(self._leftover_templates):
            try:
                await self._delete_templates(namespace, [name])
            except ApiError as err:
                log.warning(
                    "PodTemplate not deleted", extra={"template": f"{namespace}/{name}", "error": str(err)}
                )

    async def _discard_half_made(self, namespace: str, templates: Collection[str]) -> None:
        """The templates of a request that could not be created (no request names them, so only
        the PodGroup's deletion would take them otherwise)."""
        try:
            await self._delete_templates(namespace, templates)
        except ApiError as err:
            log.warning("PodTemplates of an uncreated request not deleted yet", extra={"error": str(err)})

    async def _create(self, new: NewRequest, view: GangView) -> None:
        pg = view.podgroup
        namespace = new.gang.namespace
        owner = {
            "apiVersion": pg.rt.api_version,
            "kind": pg.rt.kind,
            "name": pg.name,
            "uid": pg.uid,
            "controller": True,
        }
        if len(new.shapes) > MAX_POD_SETS:  # the API server would refuse it on every pass
            raise ApiError(422, "Invalid", msg.too_many_pod_sets(len(new.shapes), MAX_POD_SETS))
        labels = {constants.POD_GROUP_LABEL: new.gang.name}
        made: list[str] = []
        try:
            created = await self._create_request(new, labels, owner, made)
        except ApiError:
            await self._discard_half_made(namespace, made)
            raise
        if created:
            self.metrics.provisioning.labels(outcome="requested").inc()
            await self.events.emit(
                pg,
                EventReason.PROVISIONING_REQUESTED,
                msg.provisioning_requested(new.name, new.class_name),
                dedupe=new.name,
            )
            log.info("ProvisioningRequest created", extra={"gang": str(new.gang), "request": new.name})
        key = (namespace, new.name)
        self._template_names[key] = [template_name(new.name, index) for index in range(len(new.shapes))]
        self._requests[key] = ProvisioningRequestState(
            namespace, new.name, new.gang, new.class_name, new.signature, new.attempt, self.clock()
        )

    async def _create_request(
        self, new: NewRequest, labels: dict[str, str], owner: dict[str, Any], made: list[str]
    ) -> bool:
        """Its PodTemplates (each name added to ``made`` once this call created it), then the
        request; False if the request existed already."""
        namespace = new.gang.namespace
        templates: list[dict[str, Any]] = []
        for index, shape in enumerate(new.shapes):
            pod = await self.kube.get(r.PODS, namespace, shape.example)
            name = template_name(new.name, index)
            self._leftover_templates.discard((namespace, name))  # in use again
            body = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": labels,
                    "ownerReferences": [owner],
                },
                "template": pod_template_spec(pod),
            }
            if await self._create_once(r.POD_TEMPLATES, namespace, body):
                made.append(name)  # one that was there already may serve a request that exists
            templates.append({"podTemplateRef": {"name": name}, "count": shape.count})
        request = {
            "apiVersion": r.PROVISIONING_REQUESTS.api_version,
            "kind": "ProvisioningRequest",
            "metadata": {
                "name": new.name,
                "namespace": namespace,
                "labels": labels,
                "annotations": {
                    constants.PROVISIONING_SIGNATURE_ANNOTATION: new.signature,
                    constants.PROVISIONING_ATTEMPT_ANNOTATION: str(new.attempt),
                },
                "ownerReferences": [owner],
            },
            "spec": {"provisioningClassName": new.class_name, "podSets": templates},
        }
        return await self._create_once(r.PROVISIONING_REQUESTS, namespace, request)

    async def _create_once(self, rt: r.ResourceType, namespace: str, body: Mapping[str, Any]) -> bool:
        """Create it; False if it exists already (its name is the gang's and the shapes' own) and is
        Phalanx's: controlled by the same PodGroup. One of the same name that is not raises."""
        try:
            await self.kube.create(rt, namespace, body)
        except ApiError as err:
            if not err.conflict:
                raise
            name = str(body["metadata"]["name"])
            found = await self.kube.get(rt, namespace, name)
            if controller_uid(found) != controller_uid(body):
                raise ApiError(409, "AlreadyExists", msg.not_the_gangs(rt.kind, namespace, name)) from err
            return False
        return True

    async def _tell(self, view: GangView, request: ProvisioningRequestState, message: str) -> None:
        """An Event and a count when a request's phase changes (once per request and phase)."""
        key = (request.namespace, request.name)
        phase = request.phase
        if self._phases.get(key) == phase or phase not in _OUTCOMES:
            self._phases[key] = phase
            return
        self._phases[key] = phase
        self.metrics.provisioning.labels(outcome=_OUTCOMES[phase]).inc()
        if phase == RequestPhase.PROVISIONED:
            provisioned = request.condition("Provisioned")
            if provisioned is not None and request.created:
                self.metrics.provisioning_latency.observe(max(0.0, provisioned.at - request.created))
            await self.events.emit(
                view.podgroup, EventReason.CAPACITY_PROVISIONED, message, dedupe=request.name
            )
        else:
            await self.events.emit(
                view.podgroup,
                EventReason.PROVISIONING_FAILED,
                message,
                warning=True,
                dedupe=f"{request.name}/{phase}",
            )


def consume_annotations(plan: ProvisioningPlan | None, key: GangKey) -> dict[str, str]:
    """The annotations that bind the gang's members to its provisioned request (none otherwise)."""
    provisioning = plan.gangs.get(key) if plan is not None else None
    if provisioning is None or not provisioning.consumable:
        return {}
    return {
        constants.CONSUME_PROVISIONING_REQUEST_ANNOTATION: provisioning.request,
        constants.PROVISIONING_CLASS_ANNOTATION: provisioning.class_name,
    }
