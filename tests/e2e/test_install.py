"""pkletd installed as a user installs it on a node (README: "Installing on a node").

``python -m build`` makes the sdist from the checkout and the wheel from that sdist,
so a file the sdist forgets is missing from the wheel too. Both are checked against
the tree: every module of supervisor/, workers/ and ipc/ (the generated protobuf
modules among them), their stubs, a ``py.typed`` per top package, etc/ (the systemd
unit, the default config, the demo manifests); the sdist also holds proto/, docs/ and
the README. The wheel goes into a fresh venv at ``<tmp>/opt/pkletd`` (its
dependencies from the package index), which must import every module from itself,
with the working directory outside the checkout. That venv's ``pkletd`` then runs as
etc/pkletd.service runs it (ExecStart with this venv for ``/opt/pkletd`` and the
test's config for the node's) with a static pod on the test containerd, until the pod
runs and its own ``pkletd status`` shows every worker running; the unit installed
from the package data passes ``systemd-analyze verify`` with the venv's path.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.harness.containerd import list_pod_sandboxes
from tests.harness.node import REPO, Pkletd, pod_manifest, wait_for
from tests.systemd_unit import (
    CONFIG,
    INSTALL_PREFIX,
    UNIT,
    exec_start,
    systemd_verify,
    unit_complaints,
    verifiable_copy,
)

pytestmark = pytest.mark.slow

TOPS = ("supervisor", "workers", "ipc")
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
# what the README runs to find the unit and the default config in the installed package
ETC_FROM_PACKAGE = 'import importlib.resources as r; print(r.files("pkletd.etc"))'
UNIT_EXEC = "/opt/pkletd/bin/pkletd start --config /var/lib/kubelet/config.yaml"
# the index may be slow: building and installing take seconds with a warm pip cache
INSTALL_TIMEOUT_S = 900


# --------------------------------------------------------------------------- the tree


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]


def package_files() -> set[str]:
    """What the wheel holds below ``pkletd/``, as paths in the checkout."""
    code = {
        str(p.relative_to(REPO))
        for top in TOPS
        for p in files_under(REPO / top)
        if p.suffix in (".py", ".pyi")
    }
    typed = {f"{top}/py.typed" for top in TOPS}
    return code | typed | {str(p.relative_to(REPO)) for p in files_under(REPO / "etc")}


def module_names() -> list[str]:
    """Every module of the tree by its installed name (``pkletd.ipc.cri``)."""
    names = []
    for path in sorted(package_files()):
        if path.endswith(".py"):
            parts = path.removesuffix(".py").split("/")
            names.append(".".join(["pkletd", *parts[: -1 if parts[-1] == "__init__" else None]]))
    return names


# --------------------------------------------------------------------------- build, install


@dataclass(frozen=True)
class Built:
    wheel: Path
    sdist: Path


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` in ``cwd`` with no Python path setting of the test's environment."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")
    }
    result = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
    )
    said = f"{shlex.join(argv)[:200]} exited {result.returncode}"
    assert result.returncode == 0, f"{said}:\n{result.stderr[-4000:]}"
    return result


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)], cwd=out)
    (wheel,) = out.glob("pkletd-*.whl")
    (sdist,) = out.glob("pkletd-*.tar.gz")
    return Built(wheel, sdist)


@pytest.fixture(scope="module")
def venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv at ``<tmp>/opt/pkletd`` with the wheel installed."""
    node = tmp_path_factory.mktemp("node")
    prefix = node / INSTALL_PREFIX.lstrip("/")
    assert not prefix.is_relative_to(REPO)
    run([sys.executable, "-m", "venv", str(prefix)], cwd=node)
    pip = [str(prefix / "bin" / "pip"), "--disable-pip-version-check", "install", "-q"]
    run([*pip, str(built.wheel)], cwd=node)
    return prefix


def node_root(venv: Path) -> Path:
    """The temp dir holding ``opt/pkletd``: outside the checkout, and not the venv's
    parent (``python -c`` imports from its cwd first, and ``pkletd`` is the venv there)."""
    return venv.parents[1]


def in_venv(venv: Path, program: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The venv's ``bin/<program>``, run from ``node_root``."""
    return run([str(venv / "bin" / program), *args], cwd=node_root(venv))


# --------------------------------------------------------------------------- what they hold


def test_wheel_holds_every_module_the_stubs_and_the_unit(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        names = set(wheel.namelist())
    assert {f"pkletd/{path}" for path in package_files()} - names == set()
    dist_info = f"pkletd-{VERSION}.dist-info/"
    assert {n for n in names if not n.startswith(("pkletd/", dist_info))} == set()
    assert any(n.endswith("_pb2.py") for n in names)
    assert "pkletd/etc/pkletd.service" in names


def test_sdist_holds_the_tree_proto_docs_and_readme(built: Built) -> None:
    with tarfile.open(built.sdist) as sdist:
        names = {m.name for m in sdist.getmembers() if m.isfile()}
    beside = {str(p.relative_to(REPO)) for d in ("proto", "docs") for p in files_under(REPO / d)}
    expected = package_files() | beside | {"README.md", "pyproject.toml", "setup.py"}
    assert {f"pkletd-{VERSION}/{path}" for path in expected} - names == set()


# --------------------------------------------------------------------------- the venv


def test_every_module_imports_from_the_venv(venv: Path) -> None:
    script = (
        "import importlib, json, sys\n"
        "print(json.dumps({n: importlib.import_module(n).__file__ for n in sys.argv[1:]}))"
    )
    names = module_names()
    found: dict[str, str] = json.loads(in_venv(venv, "python", "-c", script, *names).stdout)
    assert set(found) == set(names) and "pkletd.supervisor.cli" in names
    outside = {name: path for name, path in found.items() if not Path(path).is_relative_to(venv)}
    assert outside == {}


def test_installed_version(venv: Path) -> None:
    assert in_venv(venv, "pkletd", "--version").stdout == f"pkletd {VERSION}\n"


def test_readme_installs_what_this_test_checks() -> None:
    """The README's install commands are the ones this test runs and checks."""
    readme = (REPO / "README.md").read_text()
    assert ETC_FROM_PACKAGE in readme
    assert UNIT_EXEC in readme
    assert " ".join(exec_start()) == UNIT_EXEC


def test_unit_from_the_package_data_verifies_with_the_venv(venv: Path) -> None:
    """The README's copy of the unit, from the installed package, checked by systemd."""
    etc = Path(in_venv(venv, "python", "-c", ETC_FROM_PACKAGE).stdout.strip())
    assert etc.is_relative_to(venv)
    installed = (etc / "pkletd.service").read_text()
    assert installed == UNIT.read_text()
    copy = verifiable_copy(node_root(venv) / "units", venv, text=installed)
    result = systemd_verify(copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert unit_complaints(result, copy) == []


# --------------------------------------------------------------------------- running it


def unit_command(venv: Path, config: Path) -> list[str]:
    """ExecStart with the venv for the unit's install prefix and ``config`` for its
    config: the rest must be what the unit says."""
    swapped = {f"{INSTALL_PREFIX}/bin/pkletd": str(venv / "bin" / "pkletd"), CONFIG: str(config)}
    argv = [swapped.get(arg, arg) for arg in exec_start()]
    assert argv == [str(venv / "bin" / "pkletd"), "start", "--config", str(config)]
    return argv


def installed_status(venv: Path, agent: Pkletd) -> dict[str, Any] | None:
    """``pkletd status --json`` of the venv's pkletd; None while it cannot answer."""
    argv = [str(venv / "bin" / "pkletd"), "status", "--json", "--run-dir", str(agent.run_dir)]
    result = subprocess.run(argv, cwd=node_root(venv), capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        return None
    reply: dict[str, Any] = json.loads(result.stdout)
    return reply


def pod_running_on_running_workers(status: dict[str, Any] | None, pod: str) -> bool:
    if status is None or not status["workers"]:
        return False
    workers_up = all(w["state"] == "running" for w in status["workers"])
    found = [p for p in status["pods"] if p["name"] == pod and p["phase"] == "Running"]
    return workers_up and any(c["state"] == "running" for p in found for c in p["containers"])


def test_installed_pkletd_runs_a_static_pod_as_the_unit_does(venv: Path, pkletd: Pkletd) -> None:
    agent = pkletd
    agent.command = unit_command(venv, agent.config)
    agent.put("installed", pod_manifest("installed"))
    agent.start(wait=False)
    pod = f"installed-{agent.node}"
    wait_for(
        f"{pod} Running and every worker running (the venv's pkletd status)",
        lambda: pod_running_on_running_workers(installed_status(venv, agent), pod),
        timeout=60,
    )

    agent.remove("installed")
    wait_for(
        f"{pod} gone",
        lambda: (s := installed_status(venv, agent)) and all(p["name"] != pod for p in s["pods"]),
        timeout=60,
    )
    wait_for(
        f"{pod}'s sandbox removed",
        lambda: all(s.metadata.name != pod for s in list_pod_sandboxes(agent.endpoint)),
    )
    in_venv(venv, "pkletd", "stop", "--run-dir", str(agent.run_dir))
    assert agent.proc is not None
    assert agent.proc.wait(timeout=30) == 0
