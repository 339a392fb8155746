"""Container hardening rules shared by the raw-file and built-overlay tests."""

from __future__ import annotations

from .manifests import IMAGE, Obj


def container_problems(pod_spec: Obj, container: Obj) -> list[str]:
    """What is wrong with ``container`` (in ``pod_spec``) against Phalanx's hardening rules."""
    sc = container.get("securityContext") or {}
    pod_sc = pod_spec.get("securityContext") or {}
    problems = []
    if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
        problems.append("runAsNonRoot")
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.append("readOnlyRootFilesystem")
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append("allowPrivilegeEscalation")
    if "ALL" not in (sc.get("capabilities") or {}).get("drop", []) or (sc.get("capabilities") or {}).get(
        "add"
    ):
        problems.append("capabilities")
    seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
    if seccomp != "RuntimeDefault":
        problems.append("seccompProfile")
    if sc.get("privileged"):
        problems.append("privileged")
    resources = container.get("resources") or {}
    for kind in ("requests", "limits"):
        if not {"cpu", "memory"} <= set(resources.get(kind) or {}):
            problems.append(f"resources.{kind}")
    if not str(container.get("image", "")).startswith(IMAGE):
        problems.append("image")
    return problems
