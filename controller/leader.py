"""Leader election on a coordination.k8s.io Lease, so two replicas never both admit gangs.

As in client-go: acquire when the lease is free or expired, renew every ``renew`` seconds, and
give up leadership (the process exits, to be restarted as a standby) if renewal fails for longer
than the lease duration -- by then another replica may have taken over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from controller.kube import ApiError, Kube
from controller.resources import LEASES

log = logging.getLogger(__name__)


def _micro(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: Any) -> float:
    if not value:
        return 0.0
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        clock: Callable[[], float],
        duration: float = 15.0,
        renew: float = 5.0,
    ) -> None:
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.clock, self.duration, self.renew = clock, duration, renew
        # Step down well before the lease can expire for the others (client-go: 10 s of 15 s).
        self.renew_deadline = duration * 2 / 3
        self.is_leader = asyncio.Event()
        self.lost = asyncio.Event()

    async def _try(self) -> bool:
        now = self.clock()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.duration),
            "renewTime": _micro(now),
        }
        try:
            lease = await self.kube.get(LEASES, self.namespace, self.name)
        except ApiError as err:
            if not err.not_found:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {**spec, "acquireTime": _micro(now), "leaseTransitions": 0},
            }
            try:
                await self.kube.create(LEASES, self.namespace, body)
                return True
            except ApiError as create_err:
                if create_err.conflict:
                    return False
                raise
        current = lease.get("spec") or {}
        holder = current.get("holderIdentity")
        expires = _parse(current.get("renewTime")) + float(
            current.get("leaseDurationSeconds") or self.duration
        )
        if holder not in (None, "", self.identity) and expires > now:
            return False
        new_spec = {**current, **spec}
        if holder != self.identity:
            new_spec["acquireTime"] = _micro(now)
            new_spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
        lease["spec"] = new_spec
        try:  # optimistic concurrency through metadata.resourceVersion
            await self.kube.replace(LEASES, self.namespace, self.name, lease)
        except ApiError as err:
            if err.conflict:
                return False
            raise
        return True

    async def run(self) -> None:
        last_renewed = 0.0
        while True:
            try:
                ok = await self._try()
            except Exception as err:  # transport errors count as a failed renewal
                log.warning("lease renewal failed", extra={"error": repr(err)})
                ok = False
            now = self.clock()
            if ok:
                last_renewed = now
                if not self.is_leader.is_set():
                    log.info("became leader", extra={"identity": self.identity})
                    self.is_leader.set()
            elif self.is_leader.is_set() and now - last_renewed >= self.renew_deadline:
                log.error("lost leadership", extra={"identity": self.identity})
                self.lost.set()
                return
            await asyncio.sleep(self.renew if self.is_leader.is_set() else self.renew / 2)
