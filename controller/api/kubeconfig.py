"""kubectl's way of reading kubeconfigs: which files, how several are merged, which context is used.

The files: ``--kubeconfig`` alone when given (it must exist), else every file of ``$KUBECONFIG``
(a path list; missing files are skipped), else ``~/.kube/config``. Merged as client-go merges them:
the first file to define a cluster, user or context of a name wins, and ``current-context`` comes
from the first file that sets one. Relative paths in an entry are relative to the file that defined
it, so each is made absolute while merging. ``select`` then picks one context (``--context``, else
the current one) and applies ``--cluster`` / ``--user`` on top, as kubectl does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller.api.transport import ConfigError

SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))
# Fields holding a file path, per section: resolved against the directory of the defining file.
PATH_FIELDS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}


def files(explicit: str | None, env: Mapping[str, str] = os.environ, home: Path | None = None) -> list[Path]:
    """The kubeconfig files kubectl would read, in merge order."""
    if explicit:
        return [Path(explicit)]
    listed = env.get("KUBECONFIG")
    if listed:
        return list(dict.fromkeys(Path(entry) for entry in listed.split(os.pathsep) if entry))
    return [(home or Path.home()) / ".kube" / "config"]


def merge(paths: Sequence[Path], explicit: bool = False) -> dict[str, Any]:
    """One kubeconfig from ``paths`` by client-go's rules. A missing file is an error only when it
    was named by ``--kubeconfig`` (``explicit``); a file that is not a kubeconfig always is."""
    merged: dict[str, Any] = {section: [] for section, _ in SECTIONS}
    seen: dict[str, set[str]] = {section: set() for section, _ in SECTIONS}
    for path in paths:
        try:
            config = yaml.safe_load(path.read_text()) or {}
        except FileNotFoundError:
            if explicit:
                raise ConfigError(f"kubeconfig {path} does not exist") from None
            continue
        except (OSError, yaml.YAMLError) as err:
            raise ConfigError(f"cannot read kubeconfig {path}: {err}") from err
        if not isinstance(config, dict):
            raise ConfigError(f"kubeconfig {path} is not a kubeconfig (not a mapping)")
        base = path.resolve().parent
        if "current-context" not in merged and config.get("current-context"):
            merged["current-context"] = str(config["current-context"])
        for section, key in SECTIONS:
            for entry in config.get(section) or ():
                name = entry.get("name") if isinstance(entry, dict) else None
                if not isinstance(name, str) or name in seen[section]:
                    continue  # the first file to define a name wins
                seen[section].add(name)
                merged[section].append({"name": name, key: _absolute(entry.get(key), key, base)})
    return merged


def _absolute(value: Any, key: str, base: Path) -> dict[str, Any]:
    entry = dict(value) if isinstance(value, dict) else {}
    for field in PATH_FIELDS.get(key, ()):
        if entry.get(field):
            entry[field] = str(base / str(entry[field]))  # an absolute path stays as it is
    if key == "user" and isinstance(entry.get("exec"), dict):
        command = str(entry["exec"].get("command") or "")
        if "/" in command and not command.startswith("/"):  # client-go: ./bin/x is file-relative
            entry["exec"] = {**entry["exec"], "command": str(base / command)}
    return entry


@dataclass(frozen=True)
class Selection:
    """One context of a merged kubeconfig, as a kubeconfig of its own (what the transport reads)."""

    config: dict[str, Any]
    context: str  # its name ("" when built from --cluster/--user alone)


def select(
    merged: Mapping[str, Any], context: str | None = None, cluster: str | None = None, user: str | None = None
) -> Selection:
    """The context kubectl would use, with ``--cluster``/``--user`` overriding its own."""
    name = context or merged.get("current-context") or ""
    entries = {section: _by_name(merged, section, key) for section, key in SECTIONS}
    if context and context not in entries["contexts"]:
        raise ConfigError(f'context "{context}" does not exist')
    chosen = dict(entries["contexts"].get(name) or {})
    if name and name not in entries["contexts"] and not cluster:
        raise ConfigError(f'current-context "{name}" does not exist')
    chosen.update({key: value for key, value in (("cluster", cluster), ("user", user)) if value})
    cluster_name, user_name = chosen.get("cluster"), chosen.get("user")
    if not cluster_name:
        raise ConfigError("no context chosen: set current-context or pass --context or --cluster")
    if cluster_name not in entries["clusters"]:
        raise ConfigError(f'no server found for cluster "{cluster_name}"')
    if user_name and user_name not in entries["users"]:
        raise ConfigError(f'auth info "{user_name}" does not exist')
    label = name or "plugin"
    config: dict[str, Any] = {
        "clusters": [{"name": cluster_name, "cluster": entries["clusters"][cluster_name]}],
        "users": [{"name": user_name, "user": entries["users"][user_name]}] if user_name else [],
        "contexts": [{"name": label, "context": chosen}],
        "current-context": label,
    }
    return Selection(config, name)


def _by_name(config: Mapping[str, Any], section: str, key: str) -> dict[str, dict[str, Any]]:
    return {
        str(entry["name"]): dict(entry.get(key) or {})
        for entry in config.get(section) or ()
        if isinstance(entry, dict) and entry.get("name")
    }


def empty(merged: Mapping[str, Any]) -> bool:
    """No kubeconfig at all (no file, or files with nothing in them): kubectl then tries in-cluster."""
    return not any(merged.get(section) for section, _ in SECTIONS) and not merged.get("current-context")
