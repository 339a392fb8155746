"""When a PEM certificate expires, read with the standard library alone.

The webhook needs one field of its serving certificate (for the expiry metric); importing an X.509
library for it cost the process about 8 MB. The field sits at a fixed place in the DER encoding
(RFC 5280: Certificate > tbsCertificate > validity > notAfter), so a short walk finds it.
"""

from __future__ import annotations

import ssl
from datetime import UTC, datetime

_SEQUENCE = 0x30
_EXPLICIT_VERSION = 0xA0  # [0] EXPLICIT Version, present from X.509 v2 on
_UTC_TIME = 0x17
_GENERALIZED_TIME = 0x18


def not_after(pem: bytes) -> float:
    """The notAfter of the first certificate of a PEM chain, in Unix seconds. ValueError when the
    text holds no well-formed certificate."""
    text = pem.decode("ascii", errors="replace")
    end = text.find("-----END CERTIFICATE-----")
    if end < 0:
        raise ValueError("no PEM certificate")
    try:
        der = ssl.PEM_cert_to_DER_cert(text[: end + len("-----END CERTIFICATE-----")])
    except Exception as err:  # binascii.Error and friends: a garbled body
        raise ValueError(f"unreadable PEM certificate: {err}") from err
    _after(der, 0)  # the whole certificate is there
    tbs = _inside(der, _inside(der, 0, _SEQUENCE), _SEQUENCE)
    at = tbs
    if _tag(der, at) == _EXPLICIT_VERSION:
        at = _after(der, at)
    for _ in range(3):  # serialNumber, signature, issuer
        at = _after(der, at)
    validity = _inside(der, at, _SEQUENCE)
    at = _after(der, validity)  # notBefore
    tag = _tag(der, at)
    start = _inside(der, at, tag)
    raw = der[start : _after(der, at)].decode("ascii")
    if tag == _UTC_TIME:  # YYMMDDHHMMSSZ; years 50-99 are 19xx (RFC 5280 4.1.2.5.1)
        year = int(raw[:2])
        raw = f"{1900 + year if year >= 50 else 2000 + year}{raw[2:]}"
    elif tag != _GENERALIZED_TIME:
        raise ValueError("certificate validity has no time")
    return datetime.strptime(raw, "%Y%m%d%H%M%SZ").replace(tzinfo=UTC).timestamp()


def _tag(der: bytes, at: int) -> int:
    if at >= len(der):
        raise ValueError("certificate DER ends early")
    return der[at]


def _header(der: bytes, at: int) -> tuple[int, int]:
    """(where the content of the element at ``at`` starts, its length)."""
    if at + 2 > len(der):
        raise ValueError("certificate DER ends early")
    first = der[at + 1]
    if first < 0x80:
        return at + 2, first
    count = first & 0x7F
    if count == 0 or count > 4 or at + 2 + count > len(der):
        raise ValueError("certificate DER has a bad length")
    return at + 2 + count, int.from_bytes(der[at + 2 : at + 2 + count], "big")


def _inside(der: bytes, at: int, tag: int) -> int:
    """Where the content of the element at ``at`` starts; it must carry ``tag``."""
    if _tag(der, at) != tag:
        raise ValueError("certificate DER is not X.509")
    return _header(der, at)[0]


def _after(der: bytes, at: int) -> int:
    """Where the element after the one at ``at`` starts."""
    start, length = _header(der, at)
    if start + length > len(der):
        raise ValueError("certificate DER ends early")
    return start + length
