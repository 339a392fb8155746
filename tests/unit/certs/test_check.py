"""When a certificate must be renewed, and why a bundle is unusable."""

from __future__ import annotations

from datetime import timedelta

import pytest

from certs import issue
from certs.bundle import CertBundle
from certs.check import needs_renewal, problem_with, renewal_threshold

from .conftest import DNS, IPS, NOW

DAY = timedelta(days=1)
SECOND = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("lifetime", "threshold"),
    [
        (timedelta(days=365), timedelta(days=365) / 3),  # a third of the lifetime dominates
        (timedelta(days=60), timedelta(days=30)),  # the 30-day floor dominates
        (timedelta(days=90), timedelta(days=30)),  # both agree
        (timedelta(days=7), timedelta(days=3.5)),  # the floor is capped at half a short lifetime
    ],
)
def test_renewal_threshold(lifetime: timedelta, threshold: timedelta) -> None:
    assert renewal_threshold(NOW, NOW + lifetime) == threshold


def _cert(days: int) -> tuple[bytes, timedelta]:
    """A serving cert valid from NOW - BACKDATE to NOW + days, and its default threshold."""
    bundle = issue.new_bundle(DNS, (), NOW, days=days)
    return bundle.tls_crt, renewal_threshold(NOW - issue.BACKDATE, NOW + timedelta(days=days))


@pytest.mark.parametrize("days", [7, 60, 365])
def test_needs_renewal_boundaries(days: int) -> None:
    cert, threshold = _cert(days)
    expiry = NOW + timedelta(days=days)
    assert not needs_renewal(cert, NOW)
    assert not needs_renewal(cert, expiry - threshold)  # exactly the threshold left: still fine
    assert needs_renewal(cert, expiry - threshold + SECOND)
    assert needs_renewal(cert, expiry)  # expired
    assert needs_renewal(cert, expiry + DAY)
    assert needs_renewal(cert, NOW - issue.BACKDATE - SECOND)  # not valid yet


def test_explicit_renew_before() -> None:
    cert, _ = _cert(365)
    expiry = NOW + timedelta(days=365)
    assert not needs_renewal(cert, expiry - 10 * DAY, renew_before=10 * DAY)
    assert needs_renewal(cert, expiry - 10 * DAY + SECOND, renew_before=10 * DAY)


def test_needs_renewal_refuses_naive_time() -> None:
    cert, _ = _cert(365)
    with pytest.raises(ValueError, match="timezone-aware"):
        needs_renewal(cert, NOW.replace(tzinfo=None))


def test_a_fresh_bundle_has_no_problem() -> None:
    assert problem_with(issue.new_bundle(DNS, IPS, NOW), DNS, IPS, NOW) is None


def test_problems() -> None:
    good = issue.new_bundle(DNS, IPS, NOW)
    other = issue.new_bundle(DNS, IPS, NOW)
    cases = {
        "lacks SANs other.svc": (good, [*DNS, "other.svc"], IPS, NOW),
        "lacks SANs 10.0.0.1": (good, DNS, ["10.0.0.1"], NOW),
        "tls.key does not match": (CertBundle(good.ca_crt, good.tls_crt, other.tls_key), DNS, IPS, NOW),
        "not signed by ca.crt": (CertBundle(other.ca_crt, good.tls_crt, good.tls_key), DNS, IPS, NOW),
        "serving certificate expires soon": (good, DNS, IPS, NOW + timedelta(days=300)),
        "unreadable PEM": (CertBundle(b"junk", good.tls_crt, good.tls_key), DNS, IPS, NOW),
    }
    for expected, (bundle, dns, ips, now) in cases.items():
        problem = problem_with(bundle, dns, ips, now)
        assert problem is not None and expected in problem, (expected, problem)


def test_an_expiring_ca_is_a_problem_even_with_a_fresh_leaf() -> None:
    ca_crt, ca_key = issue.new_ca(NOW, days=400)
    later = NOW + timedelta(days=300)
    tls_crt, tls_key = issue.new_serving_cert(ca_crt, ca_key, DNS, (), later, days=30)
    problem = problem_with(CertBundle(ca_crt, tls_crt, tls_key, ca_key), DNS, (), later)
    assert problem == "CA certificate expires soon"
