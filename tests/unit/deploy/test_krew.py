"""The krew manifest and its archive: what krew would unpack and run, and the launcher it runs."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import tarfile
from fnmatch import fnmatch
from pathlib import Path
from types import ModuleType

import yaml

KREW = Path(__file__).resolve().parents[3] / "deploy" / "krew"


def archive_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("krew_archive", KREW / "archive.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_wheel(directory: Path) -> Path:
    wheel = directory / "phalanx-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: the launcher only needs its name here
    return wheel


def test_the_manifest_names_what_the_archive_holds_and_its_sha256(tmp_path: Path) -> None:
    archive, written = archive_module().build(
        fake_wheel(tmp_path), tmp_path / "dist", "https://example.test/a.tgz"
    )
    manifest = yaml.safe_load(written.read_text())
    assert (manifest["apiVersion"], manifest["kind"]) == (
        "krew.googlecontainertools.github.com/v1alpha2",
        "Plugin",
    )
    assert (manifest["metadata"]["name"], manifest["spec"]["version"]) == ("phalanx", "v0.1.0")
    [platform] = manifest["spec"]["platforms"]
    assert platform["uri"] == "https://example.test/a.tgz"
    assert platform["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    with tarfile.open(archive) as tar:
        members = {member.name: member for member in tar.getmembers()}
    assert set(members) == {"kubectl-phalanx", "phalanx-0.1.0-py3-none-any.whl"}
    assert members[platform["bin"]].mode & 0o111  # krew runs it
    for entry in platform["files"]:
        assert any(fnmatch(name, entry["from"]) for name in members), entry


def test_the_archive_is_reproducible(tmp_path: Path) -> None:
    build = archive_module().build
    wheel = fake_wheel(tmp_path)
    first, _ = build(wheel, tmp_path / "one")
    second, _ = build(wheel, tmp_path / "two")
    assert first.read_bytes() == second.read_bytes()


def test_the_committed_manifest_is_an_honest_template() -> None:
    manifest = yaml.safe_load((KREW / "phalanx.yaml").read_text())
    [platform] = manifest["spec"]["platforms"]
    assert platform["sha256"] == "SHA256-OF-THE-ARCHIVE" and platform["uri"] == "URL-OF-THE-ARCHIVE"
    assert "no krew index hosts it" in (KREW / "phalanx.yaml").read_text().lower()


def launch(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    store = tmp_path / "store"
    store.mkdir(exist_ok=True)
    (store / "kubectl-phalanx").write_bytes((KREW / "kubectl-phalanx").read_bytes())
    (store / "kubectl-phalanx").chmod(0o755)
    fake_wheel(store)
    link = tmp_path / "bin" / "kubectl-phalanx"  # as krew links it
    link.parent.mkdir(exist_ok=True)
    if not link.exists():
        link.symlink_to(store / "kubectl-phalanx")
    return subprocess.run(
        [str(link), *args],
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_the_launcher_runs_the_installed_plugin_with_the_arguments(tmp_path: Path) -> None:
    installed = tmp_path / "home" / "0.1.0"
    (installed / "bin").mkdir(parents=True)
    (installed / "bin" / "kubectl-phalanx").write_text('#!/bin/sh\necho "ran: $*"\n')
    (installed / "bin" / "kubectl-phalanx").chmod(0o755)
    (installed / ".installed").touch()
    result = launch(tmp_path, "top", "-o", "json", PHALANX_PLUGIN_HOME=str(tmp_path / "home"))
    assert (result.returncode, result.stdout, result.stderr) == (0, "ran: top -o json\n", "")


def test_the_launcher_says_what_python_it_needs(tmp_path: Path) -> None:
    result = launch(
        tmp_path, "top", PHALANX_PLUGIN_HOME=str(tmp_path / "home"), PHALANX_PYTHON="/nonexistent"
    )
    assert result.returncode == 1 and result.stdout == ""
    assert "needs Python >= 3.11; /nonexistent is missing or older" in result.stderr


def test_the_launcher_installs_into_a_virtualenv_on_first_use(tmp_path: Path) -> None:
    """With a Python whose pip is a stub: the venv is made, the wheel handed to pip, then run."""
    # The venv's python: its pip logs the call, says what pip says on stdout, and puts the plugin in.
    venv_python = (
        "#!/bin/sh\n"
        'bin=$(dirname "$0")\n'
        'echo "pip $*" >> "$bin/../log"\n'
        "echo Successfully installed phalanx-0.1.0\n"
        'printf \'#!/bin/sh\\necho "plugin $*"\\n\' > "$bin/kubectl-phalanx"\n'
        'chmod +x "$bin/kubectl-phalanx"\n'
    )
    (tmp_path / "venv-python").write_text(venv_python)
    python = tmp_path / "python3"
    python.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then\n'
        f'  mkdir -p "$3/bin" && cp {tmp_path / "venv-python"} "$3/bin/python" && chmod +x "$3/bin/python"\n'
        "  exit 0\n"
        "fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    home = tmp_path / "home"
    result = launch(tmp_path, "explain", "job/x", PHALANX_PLUGIN_HOME=str(home), PHALANX_PYTHON=str(python))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "plugin explain job/x\n"  # stdout stays the plugin's alone
    assert "first run: installing phalanx-0.1.0-py3-none-any.whl" in result.stderr
    log = (home / "0.1.0" / "log").read_text()
    assert (
        "pip install --quiet --disable-pip-version-check" in log and "phalanx-0.1.0-py3-none-any.whl" in log
    )
    assert (home / "0.1.0" / ".installed").exists()
