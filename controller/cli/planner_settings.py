"""The planner settings the running controller uses, read from its Deployment: env, then args.

The controller's precedence is defaults < environment (``PHALANX_CONTROLLER_*``) < flags; the
plugin applies the same to the controller container's ``env`` (plain ``value`` entries) and its
``command``/``args``, and says where each planner setting came from. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.runtime.config import ControllerSettings
from shared.cli import flag
from shared.settings import InvalidSettings, field_types, from_text

ENV_PREFIX = "PHALANX_CONTROLLER_"
CONTAINER = "controller"
# The settings ``runtime.wiring.planner_config`` reads: the only ones that change a plan.
PLANNER_FIELDS = (
    "preemption",
    "preemption_min_runtime_seconds",
    "starvation_age_seconds",
    "default_schedule_timeout_seconds",
    "topology_levels",
    "topologies",
)
DEFAULT, ENV, ARGS = "default", "env", "args"


@dataclass(frozen=True)
class SettingsUsed:
    """What the planner ran with, where from, and what could not be read."""

    settings: ControllerSettings
    source: str  # "Deployment ns/name", or "defaults (why)"
    origins: dict[str, str] = field(default_factory=dict)  # planner field -> default | env | args
    warnings: tuple[str, ...] = ()

    def data(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "values": {
                flag(name).removeprefix("--"): {
                    "value": getattr(self.settings, name),
                    "from": self.origins.get(name, DEFAULT),
                }
                for name in PLANNER_FIELDS
            },
        }


def defaults(why: str) -> SettingsUsed:
    return SettingsUsed(ControllerSettings(), f"defaults ({why})")


def from_deployment(deployment: Mapping[str, Any]) -> SettingsUsed:
    """The controller container's settings as its Deployment sets them."""
    meta = deployment.get("metadata") or {}
    source = f"Deployment {meta.get('namespace')}/{meta.get('name')}"
    containers = ((deployment.get("spec") or {}).get("template") or {}).get("spec", {}).get(
        "containers"
    ) or []
    container = next(
        (c for c in containers if c.get("name") == CONTAINER), containers[0] if containers else {}
    )
    warnings: list[str] = []
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for env in container.get("env") or ():
        name = str(env.get("name", ""))
        key = name.removeprefix(ENV_PREFIX).lower()
        if not name.startswith(ENV_PREFIX) or key not in field_types(ControllerSettings):
            continue
        if "value" in env:
            values[key], origins[key] = env["value"], ENV
        elif key in PLANNER_FIELDS:  # a ConfigMap or Secret reference: not followed
            warnings.append(f"{name} is set from {', '.join(env.get('valueFrom') or {})}: not read")
    command = [str(part) for part in container.get("command") or ()]
    for key, value in parse_args([*command[1:], *(str(arg) for arg in container.get("args") or ())]):
        values[key], origins[key] = value, ARGS
    try:
        settings = from_text(ControllerSettings, values)
    except InvalidSettings as err:
        why = f"{source} has invalid settings: {len(err.errors)}"
        return SettingsUsed(ControllerSettings(), f"defaults ({why})")
    planner_origins = {key: origin for key, origin in origins.items() if key in PLANNER_FIELDS}
    return SettingsUsed(settings, source, planner_origins, tuple(warnings))


def parse_args(tokens: Sequence[str]) -> list[tuple[str, Any]]:
    """(field, value) of every controller flag in ``tokens``, as the controller's command line reads
    them: ``--x=v``, ``--x v``, and booleans as ``--x`` / ``--no-x``. Other tokens are skipped."""
    kinds = field_types(ControllerSettings)
    found: list[tuple[str, Any]] = []
    position = 0
    while position < len(tokens):
        token = tokens[position]
        position += 1
        if not token.startswith("--"):
            continue
        name, equals, value = token[2:].partition("=")
        key = name.replace("-", "_")
        if key.startswith("no_") and kinds.get(key[3:]) is bool:
            found.append((key[3:], False))
        elif kinds.get(key) is bool:
            found.append((key, value if equals else True))
        elif key in kinds:
            if not equals and position < len(tokens):
                value = tokens[position]
                position += 1
            found.append((key, value))
    return found
