"""The four PEM blobs of a webhook's TLS setup, named as in files and in the Secret."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

CA_CRT = "ca.crt"
CA_KEY = "ca.key"
TLS_CRT = "tls.crt"
TLS_KEY = "tls.key"
# Private keys are written 0600; certificates are public.
PRIVATE = frozenset({CA_KEY, TLS_KEY})


@dataclass(frozen=True)
class CertBundle:
    """``ca_crt`` may hold several CA certificates (old + new during a CA rotation); the first one
    signs ``tls_crt``. ``ca_key`` is None where the CA key is not kept (e.g. cert-manager's Secret)."""

    ca_crt: bytes
    tls_crt: bytes
    tls_key: bytes
    ca_key: bytes | None = None

    def as_mapping(self, *, with_ca_key: bool = True) -> dict[str, bytes]:
        data = {CA_CRT: self.ca_crt, TLS_CRT: self.tls_crt, TLS_KEY: self.tls_key}
        if with_ca_key and self.ca_key is not None:
            data[CA_KEY] = self.ca_key
        return data

    @classmethod
    def from_mapping(cls, data: Mapping[str, bytes]) -> CertBundle | None:
        """None when a required entry is missing or empty."""
        if not all(data.get(key) for key in (CA_CRT, TLS_CRT, TLS_KEY)):
            return None
        return cls(
            ca_crt=data[CA_CRT], tls_crt=data[TLS_CRT], tls_key=data[TLS_KEY], ca_key=data.get(CA_KEY) or None
        )
