"""One admission request, from body bytes to HTTP answer: parse, mutate, respond, count, log.

Synchronous and free of aiohttp, so that it can be fuzzed directly; it never raises.
"""

from __future__ import annotations

import logging
import time
from typing import NamedTuple

from shared.jsonread import obj, text
from shared.kinds import KINDS, POD
from shared.logging import log_fields
from webhook.body import JSON_TYPE
from webhook.metrics import WebhookMetrics
from webhook.mutate import Mutation, MutationConfig, Outcome, mutate_request
from webhook.review import Review, ReviewError, encode_response, parse_review

log = logging.getLogger("phalanx.webhook")

TEXT = "text/plain"
# Metric label values are bounded to what Phalanx knows, whatever a client sends.
KIND_LABELS = frozenset({POD[2], *(gvk[2] for gvk in KINDS)})
UNKNOWN = "unknown"


class Answer(NamedTuple):  # a tuple: made on every request, and cheaper than a frozen dataclass
    status: int
    body: bytes
    content_type: str = JSON_TYPE


class Admitter:
    def __init__(self, config: MutationConfig, metrics: WebhookMetrics) -> None:
        self._config = config
        self._metrics = metrics

    def admit(self, body: bytes | bytearray, started: float) -> Answer:
        """The answer to one request body; ``started`` is the ``perf_counter()`` at its arrival."""
        try:
            review = parse_review(body)
        except ReviewError as err:
            return self.bad_request(400, str(err), started)
        except Exception as err:  # without a uid there is no AdmissionReview to answer with
            # Only the exception's type: its text may quote the body, and a hostile client's
            # bodies must not fill the log (nor tracebacks: one line per bad request).
            message = f"could not read the AdmissionReview ({type(err).__name__})"
            return self.bad_request(400, message, started)
        kind, operation = review.gvk[2], review.operation
        try:
            mutation = mutate_request(review.request, operation, review.gvk, self._config)
            answer = Answer(200, _encode(review, mutation))
            outcome = str(mutation.outcome)  # a StrEnum's str() is its value, cheaper than .value
        except Exception as err:
            # failurePolicy is Fail: refusing is the safe answer to a bug; the traceback is logged.
            log.exception("phalanx internal error", extra={"uid": review.uid, "kind": kind})
            message = f"phalanx internal error: {type(err).__name__}: {err}"[:512]
            answer = Answer(200, encode_response(review, allowed=False, message=message, code=500))
            mutation = None
            outcome = "error"
        self._metrics.count(
            kind if kind in KIND_LABELS else "other",
            operation,  # parse_review checked it is one of OPERATIONS
            outcome,
            len(mutation.ops) if mutation else 0,
        )
        elapsed = time.perf_counter() - started
        self._metrics.duration.observe(elapsed)
        if mutation is not None:
            _log(review, kind, mutation, elapsed)
        return answer

    def bad_request(self, status: int, message: str, started: float) -> Answer:
        """A 4xx with a plain message: the body was not something to admit. One WARNING line, which
        never quotes the body (the messages say what was wrong, not what was sent)."""
        self._metrics.count(UNKNOWN, UNKNOWN, "bad_request")
        self._metrics.duration.observe(time.perf_counter() - started)
        log.warning("bad admission request", extra={"status": status, "error": message})
        return Answer(status, f"phalanx: {message}\n".encode(), TEXT)


def _encode(review: Review, mutation: Mutation) -> bytes:
    if mutation.allowed:
        return encode_response(review, ops=mutation.ops, warnings=mutation.warnings)
    return encode_response(
        review, allowed=False, warnings=mutation.warnings, message=mutation.reason, code=403
    )


def _log(review: Review, kind: str, mutation: Mutation, elapsed: float) -> None:
    changed = mutation.ops or mutation.warnings or mutation.outcome is Outcome.REJECTED
    level = logging.INFO if changed else logging.DEBUG
    if not log.isEnabledFor(level):
        return
    request = review.request
    meta = obj(obj(request.get("object")).get("metadata"))
    log_fields(
        log,
        level,
        "admission",
        {
            "uid": review.uid,
            "kind": kind,
            "namespace": text(request.get("namespace")) or text(meta.get("namespace")),
            "object_name": text(meta.get("name")) or text(meta.get("generateName")),
            "outcome": mutation.outcome.value,
            "group": mutation.group,
            "ops": len(mutation.ops),
            "warnings": mutation.warnings,
            "reason": mutation.reason,
            "duration_ms": round(elapsed * 1000, 3),
        },
        created=time.time(),
    )
