"""Leader election on a coordination.k8s.io Lease, so two replicas never both admit gangs.

As in client-go: acquire when the lease is free or expired, renew every ``renew`` seconds, and
give up leadership (the process exits, to be restarted as a standby) if renewal has not succeeded
within the renew deadline -- before the lease can expire for the others. Two rules keep that true
whatever the network and the clocks do:

- every renewal attempt is bounded by the time left until the deadline, so a request that hangs
  cannot keep a leader believing it still leads;
- another holder's lease expires ``leaseDurationSeconds`` after this process *saw* it last change
  (monotonic time), never by comparing the holder's wall clock with ours.

On shutdown the leader releases the lease, so a rollout hands over at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from controller.api.kube import ApiError, Kube
from controller.api.resources import LEASES

log = logging.getLogger(__name__)


def _micro(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        clock: Callable[[], float],
        duration: float = 15.0,
        renew: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.clock, self.duration, self.renew = clock, duration, renew  # clock: renewTime only
        self.monotonic = monotonic
        # Step down well before the lease can expire for the others (client-go: 10 s of 15 s).
        self.renew_deadline = duration * 2 / 3
        self.is_leader = asyncio.Event()
        self.lost = asyncio.Event()
        self._seen: tuple[object, object] | None = None  # (holder, renewTime) last read
        self._seen_at = 0.0  # monotonic time it last changed

    def _expired(self, spec: dict[str, Any]) -> bool:
        """Has another holder's lease gone unrenewed for its duration, as this process saw it?"""
        record = (spec.get("holderIdentity"), spec.get("renewTime"))
        now = self.monotonic()
        if record != self._seen:
            self._seen, self._seen_at = record, now
        return now - self._seen_at >= float(spec.get("leaseDurationSeconds") or self.duration)

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
        if holder not in (None, "", self.identity) and not self._expired(current):
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
            leading = self.is_leader.is_set()
            budget = last_renewed + self.renew_deadline - self.monotonic() if leading else self.duration
            tried_at = self.monotonic()
            try:
                async with asyncio.timeout(max(budget, 0.0)):
                    ok = await self._try()
            except Exception as err:  # transport errors and timeouts count as a failed renewal
                log.warning(
                    "lease renewal failed",
                    extra={"error": repr(err), "seconds": round(self.monotonic() - tried_at, 2)},
                )
                ok = False
            now = self.monotonic()
            if ok and now - tried_at > self.renew:
                # Renewals this slow eat into the renew deadline: say so before one runs out.
                log.warning("lease renewal slow", extra={"seconds": round(now - tried_at, 2)})
            if ok:
                last_renewed = now
                if not leading:
                    log.info("became leader", extra={"identity": self.identity})
                    self.is_leader.set()
            elif leading and now - last_renewed >= self.renew_deadline:
                log.error("lost leadership", extra={"identity": self.identity})
                self.is_leader.clear()  # stop admitting now, not when the process is gone
                self.lost.set()
                return
            pause = self.renew if self.is_leader.is_set() else self.renew / 2
            await asyncio.sleep(pause)
            late = self.monotonic() - now - pause
            if late > self.renew:  # nothing ran on the event loop meanwhile: a renewal was delayed
                log.warning("event loop busy", extra={"seconds": round(late, 2)})

    async def release(self, timeout: float = 2.0) -> None:
        """Give the lease up (holder empty, as client-go's ReleaseOnCancel) so a standby takes over
        at once. Best effort: on failure the lease simply expires."""
        if not self.is_leader.is_set():
            return
        self.is_leader.clear()
        try:
            async with asyncio.timeout(timeout):
                lease = await self.kube.get(LEASES, self.namespace, self.name)
                spec = lease.get("spec") or {}
                if spec.get("holderIdentity") != self.identity:
                    return
                lease["spec"] = {
                    **spec,
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "renewTime": _micro(self.clock()),
                }
                await self.kube.replace(LEASES, self.namespace, self.name, lease)
            log.info("released leadership", extra={"identity": self.identity})
        except Exception as err:
            log.warning("lease not released", extra={"error": repr(err)})
