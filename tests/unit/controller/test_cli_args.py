"""kubectl phalanx's command line: kubectl's flags, before or after the command; kubeconfig files merged
as kubectl merges them; the context and its namespace."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
import yaml

from controller.api import kubeconfig
from controller.api.transport import ConfigError
from controller.cli.__main__ import _context_namespace, main, parser
from controller.cli.connection import Chosen, choose, impersonation, request_timeout
from controller.cli.render import duration, table


def test_flags_count_before_and_after_the_command() -> None:
    before = parser().parse_args(["-n", "a", "-o", "json", "top"])
    assert (before.namespace, before.output, before.command) == ("a", "json", "top")
    after = parser().parse_args(["top", "-n", "b", "-A"])
    assert (after.namespace, after.output, after.all_namespaces) == ("b", "table", True)
    both = parser().parse_args(["-n", "a", "explain", "job/x", "-n", "c"])
    assert (both.namespace, both.target) == ("c", "job/x")


def test_unknown_output_format_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["top", "-o", "xml"])
    assert exit_.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_kubectl_s_connection_flags() -> None:
    flags = ["--cluster", "c", "--user", "u", "--as", "me", "--as-group", "g1", "--as-group", "g2"]
    args = parser().parse_args(["--context", "a", "top", *flags, "--request-timeout", "1m30s"])
    assert (args.context, args.cluster, args.user, args.as_user) == ("a", "c", "u", "me")
    assert (args.as_groups, args.request_timeout) == (["g1", "g2"], 90.0)
    assert impersonation(args) == (
        ("Impersonate-User", "me"),
        ("Impersonate-Group", "g1"),
        ("Impersonate-Group", "g2"),
    )
    defaults = parser().parse_args(["top"])
    assert (defaults.context, defaults.as_user, defaults.as_groups, defaults.request_timeout) == (
        None,
        None,
        None,
        None,
    )
    with pytest.raises(ConfigError, match="--as-group needs --as"):
        impersonation(parser().parse_args(["top", "--as-group", "g"]))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0.0), ("30", 30.0), ("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("2h", 7200.0)],
)
def test_request_timeout_reads_kubectl_durations(text: str, seconds: float) -> None:
    assert request_timeout(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "10x", "1m x", "-1s"])
def test_a_bad_request_timeout_is_a_usage_error(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["top", f"--request-timeout={text}"])
    assert exit_.value.code == 2
    assert "invalid duration" in capsys.readouterr().err


def test_a_bare_call_prints_usage_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: kubectl phalanx") and "explain" in out and "top" in out and err == ""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"kubectl-phalanx {metadata.version('phalanx')}\n"


def test_all_namespaces_only_where_it_applies() -> None:
    assert parser().parse_args(["audit", "-A"]).all_namespaces
    with pytest.raises(SystemExit):
        parser().parse_args(["explain", "job/x", "-A"])
    watch = parser().parse_args(["top", "-w", "--interval", "5"])
    assert (watch.watch, watch.interval) == (True, 5.0)


# ---- kubeconfig: files, merging, the context ------------------------------------------------------


def write(path: Path, config: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


def test_kubeconfig_files_as_kubectl_finds_them(tmp_path: Path) -> None:
    assert kubeconfig.files("/given", {"KUBECONFIG": "/a:/b"}) == [Path("/given")]
    assert kubeconfig.files(None, {"KUBECONFIG": "/a::/b:/a"}) == [Path("/a"), Path("/b")]
    assert kubeconfig.files(None, {}, home=tmp_path) == [tmp_path / ".kube" / "config"]


def test_kubeconfig_list_is_merged_first_file_wins(tmp_path: Path) -> None:
    first = write(
        tmp_path / "one" / "config",
        {
            "clusters": [
                {"name": "shared", "cluster": {"server": "https://one", "certificate-authority": "ca.crt"}}
            ],
            "users": [{"name": "me", "user": {"token": "first"}}],
            "contexts": [{"name": "one", "context": {"cluster": "shared", "user": "me", "namespace": "ns1"}}],
        },
    )
    second = write(
        tmp_path / "two" / "config",
        {
            "current-context": "two",
            "clusters": [
                {"name": "shared", "cluster": {"server": "https://ignored"}},
                {
                    "name": "other",
                    "cluster": {"server": "https://two", "certificate-authority": "/abs/ca.crt"},
                },
            ],
            "users": [
                {"name": "me", "user": {"token": "second"}},
                {"name": "them", "user": {"client-certificate": "c.crt", "client-key": "c.key"}},
            ],
            "contexts": [
                {"name": "two", "context": {"cluster": "other", "user": "them", "namespace": "ns2"}}
            ],
        },
    )
    third = write(tmp_path / "three", {"current-context": "one"})
    merged = kubeconfig.merge([first, tmp_path / "missing", second, third])
    # current-context from the first file that sets one (the second), not the last
    assert merged["current-context"] == "two"
    clusters = {entry["name"]: entry["cluster"] for entry in merged["clusters"]}
    assert clusters["shared"] == {
        "server": "https://one",
        "certificate-authority": str(tmp_path / "one" / "ca.crt"),
    }
    assert clusters["other"]["certificate-authority"] == "/abs/ca.crt"
    users = {entry["name"]: entry["user"] for entry in merged["users"]}
    assert users["me"] == {"token": "first"}
    assert users["them"]["client-key"] == str(tmp_path / "two" / "c.key")

    current = kubeconfig.select(merged)
    assert current.context == "two" and current.config["clusters"][0]["cluster"]["server"] == "https://two"
    picked = kubeconfig.select(merged, context="one")
    assert picked.config["users"] == [{"name": "me", "user": {"token": "first"}}]
    assert _context_namespace(Chosen(picked.config, "")) == "ns1"
    overridden = kubeconfig.select(merged, context="one", cluster="other", user="them")
    assert overridden.config["clusters"][0]["name"] == "other"
    assert overridden.config["users"][0]["name"] == "them"
    assert _context_namespace(Chosen(overridden.config, "")) == "ns1"  # the context's, still


@pytest.mark.parametrize(
    ("context", "cluster", "user", "message"),
    [
        ("nope", None, None, 'context "nope" does not exist'),
        (None, "nope", None, 'no server found for cluster "nope"'),
        (None, None, "nope", 'auth info "nope" does not exist'),
    ],
)
def test_what_the_kubeconfig_lacks_is_named(
    tmp_path: Path, context: str | None, cluster: str | None, user: str | None, message: str
) -> None:
    config = write(
        tmp_path / "config",
        {
            "current-context": "a",
            "clusters": [{"name": "c", "cluster": {"server": "https://c"}}],
            "contexts": [{"name": "a", "context": {"cluster": "c"}}],
        },
    )
    with pytest.raises(ConfigError, match=message):
        kubeconfig.select(kubeconfig.merge([config]), context, cluster, user)


def test_a_missing_kubeconfig_given_by_flag_is_an_error_a_listed_one_is_skipped(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        kubeconfig.merge([tmp_path / "none"], explicit=True)
    assert kubeconfig.empty(kubeconfig.merge([tmp_path / "none"]))
    (tmp_path / "list").write_text("- a\n")
    with pytest.raises(ConfigError, match="not a kubeconfig"):
        kubeconfig.merge([tmp_path / "list"])


def test_choose_uses_the_kubeconfig_list_and_context_flag(tmp_path: Path) -> None:
    one = write(tmp_path / "1", {"clusters": [{"name": "c1", "cluster": {"server": "https://1"}}]})
    two = write(
        tmp_path / "2",
        {
            "current-context": "b",
            "clusters": [{"name": "c2", "cluster": {"server": "https://2"}}],
            "contexts": [
                {"name": "a", "context": {"cluster": "c1", "namespace": "from-a"}},
                {"name": "b", "context": {"cluster": "c2"}},
            ],
        },
    )
    env = {"KUBECONFIG": f"{one}:{two}"}
    chosen = choose(parser().parse_args(["top", "--context", "a"]), env)
    assert chosen.described == 'context "a"'
    assert chosen.config is not None and chosen.config["clusters"][0]["cluster"]["server"] == "https://1"
    assert _context_namespace(chosen) == "from-a"
    assert _context_namespace(choose(parser().parse_args(["top"]), env)) == "default"


def test_no_kubeconfig_at_all_is_an_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["top", "--kubeconfig", str(tmp_path / "none")]) == 3
    assert capsys.readouterr().err == f"error: kubeconfig {tmp_path / 'none'} does not exist\n"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["top"]) == 3
    assert capsys.readouterr().err.startswith("error: no kubeconfig: none of")
    write(tmp_path / "c", {"clusters": [{"name": "c", "cluster": {"server": "https://c"}}]})
    assert main(["top", "--kubeconfig", str(tmp_path / "c"), "--context", "x"]) == 3
    assert capsys.readouterr().err == 'error: context "x" does not exist\n'


def test_rendering() -> None:
    assert [duration(s) for s in (None, 5, 600, 3 * 3600 + 300, 3 * 86400)] == [
        "-",
        "5s",
        "10m",
        "3h05m",
        "3d0h",
    ]
    assert table([{"a": "x", "b": None}], [("a", "A"), ("b", "LONGER")]).splitlines() == [
        "A   LONGER",
        "x   -",
    ]
