"""Where the API server is and who Phalanx is to it: kubeconfigs and the pod's ServiceAccount, read
without kubernetes-asyncio (controller/api/transport.py)."""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path
from typing import Any

import pytest

from controller.api.transport import ConfigError, from_kubeconfig, in_cluster
from tests.component.webhook.tls_helpers import serving_bundle


def kubeconfig(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "config"
    path.write_text(json.dumps(config))  # JSON is YAML too, and what the e2e tier writes
    return str(path)


def test_token_and_inline_ca(tmp_path: Path) -> None:
    ca = base64.b64encode(serving_bundle().ca_crt).decode()
    cluster = {"server": "https://10.0.0.1:6443/", "certificate-authority-data": ca, "tls-server-name": "api"}
    endpoint = from_kubeconfig(kubeconfig(tmp_path, cluster, {"token": "abc"}))
    assert endpoint is not None and endpoint.tls is not None and endpoint.token is not None
    assert (endpoint.server, endpoint.server_hostname, endpoint.token.current()) == (
        "https://10.0.0.1:6443",
        "api",
        "abc",
    )
    assert endpoint.tls.verify_mode is ssl.CERT_REQUIRED and endpoint.tls.check_hostname
    assert len(endpoint.tls.get_ca_certs()) == 1


def test_client_certificate_files_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    bundle = serving_bundle()
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(bundle.ca_crt)
    (tmp_path / "pki" / "admin.crt").write_bytes(bundle.tls_crt)
    (tmp_path / "pki" / "admin.key").write_bytes(bundle.tls_key)
    cluster = {"server": "https://127.0.0.1:6443", "certificate-authority": "pki/ca.crt"}
    user = {"client-certificate": "pki/admin.crt", "client-key": "pki/admin.key"}
    endpoint = from_kubeconfig(kubeconfig(tmp_path, cluster, user))
    assert endpoint is not None and endpoint.tls is not None and endpoint.token is None


def test_a_token_file_insecure_skip_verify_and_a_proxy(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    cluster = {
        "server": "https://api.example:6443",
        "insecure-skip-tls-verify": True,
        "proxy-url": "http://proxy.example:3128",
    }
    endpoint = from_kubeconfig(kubeconfig(tmp_path, cluster, {"tokenFile": "token"}))
    assert endpoint is not None and endpoint.tls is not None and endpoint.token is not None
    assert endpoint.tls.verify_mode is ssl.CERT_NONE
    assert endpoint.token.current() == "from-file"
    assert endpoint.proxy == "http://proxy.example:3128"


@pytest.mark.parametrize(
    "user",
    [
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "aws"}},
        {"auth-provider": {"name": "oidc"}},
        {"username": "admin", "password": "secret"},
    ],
)
def test_users_only_kubernetes_asyncio_can_serve_are_left_to_it(tmp_path: Path, user: dict[str, Any]) -> None:
    assert from_kubeconfig(kubeconfig(tmp_path, {"server": "https://api.example"}, user)) is None


def test_a_context_that_is_not_there_is_a_clear_error(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"server": "https://api.example"}, {"token": "t"})
    with pytest.raises(ConfigError, match="no context named 'other'"):
        from_kubeconfig(path, "other")


def test_in_cluster_from_the_service_account_files(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(serving_bundle().ca_crt)
    (tmp_path / "token").write_text("sa-token")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    endpoint = in_cluster(tmp_path, env)
    assert endpoint.server == "https://[fd00::1]:443"
    assert endpoint.token is not None and endpoint.token.current() == "sa-token"
    with pytest.raises(ConfigError, match="not in a pod"):
        in_cluster(tmp_path, {})
