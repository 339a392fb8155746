"""Default object names (deploy/ uses the same) and the DNS names a Service answers to."""

from __future__ import annotations

DEFAULT_NAMESPACE = "phalanx-system"
DEFAULT_SERVICE = "phalanx-webhook"
DEFAULT_SECRET = "phalanx-webhook-tls"
DEFAULT_WEBHOOK_CONFIG = "phalanx-webhook"
DEFAULT_CLUSTER_DOMAIN = "cluster.local"


def service_dns_names(
    service: str, namespace: str, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
) -> tuple[str, ...]:
    """Every name the API server (or a pod) may use to reach ``service`` in ``namespace``."""
    return (
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.{cluster_domain}",
    )
