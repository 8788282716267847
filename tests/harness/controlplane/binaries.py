"""The Kubernetes binaries the tests run, built from Go modules into a cache.

Each group is one go.mod under ``tests/cluster/<group>/`` that pins one release
and lists its commands as ``tool`` lines. A group is built once per machine into
``$PKLETD_BIN_CACHE`` (default ``/var/cache/pkletd``), in a folder named for the module
it pins, its version and a hash of its go.mod (but its comments) and go.sum::

    /var/cache/pkletd/kubernetes-v1.37.2-1a2b3c4d/{kube-apiserver,kubectl,kubelet,...}
    /var/cache/pkletd/etcd-v3.7.0-5e6f7a8b/etcd
    /var/cache/pkletd/crictl-v1.37.0-9c0d1e2f/crictl

``python -m tests.harness.controlplane build`` (``make binaries``) builds what is missing;
``path("kube-apiserver")`` names a built binary (and builds its group first if needed).
Nothing built lands in the checkout.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BUILD_DIR = Path(__file__).resolve().parents[2] / "cluster"
CACHE = Path(os.environ.get("PKLETD_BIN_CACHE", "/var/cache/pkletd"))
# The version the Kubernetes binaries report (kubectl version, the kube-apiserver's
# /version, the kubelet's nodeInfo): a module build carries none of its own.
VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")


@dataclass(frozen=True)
class Group:
    """One go.mod of ``tests/cluster`` and the commands it builds."""

    name: str
    renamed: tuple[tuple[str, str], ...] = ()  # binaries go names for their package

    @property
    def module_dir(self) -> Path:
        return BUILD_DIR / self.name

    def _go_mod(self) -> str:
        return (self.module_dir / "go.mod").read_text()

    @property
    def pinned(self) -> tuple[str, str]:
        """The module the group's commands come from, and the version it is pinned at."""
        required = re.findall(r"^(?:require )?\s*(\S+) (v\S+)", self._go_mod(), re.MULTILINE)
        first = self.tools[0]
        found = [(m, v) for m, v in required if first == m or first.startswith(m + "/")]
        if not found:
            raise RuntimeError(f"{self.module_dir / 'go.mod'}: no require for {first}")
        return max(found, key=lambda pin: len(pin[0]))

    @property
    def tools(self) -> list[str]:
        """The ``tool`` packages of the go.mod, in one line or a block."""
        text = self._go_mod()
        block = re.search(r"^tool \(\n(.*?)^\)", text, re.MULTILINE | re.DOTALL)
        lines = block.group(1).split() if block else []
        return lines + re.findall(r"^tool ([^\s(]\S*)$", text, re.MULTILINE)

    @property
    def commands(self) -> list[str]:
        """The binaries' names: as ``go build`` names them (a package's last path
        element, a major version suffix skipped), then ``renamed``."""
        renamed = dict(self.renamed)
        names = [[p for p in t.split("/") if not re.fullmatch(r"v\d+", p)][-1] for t in self.tools]
        return [renamed.get(name, name) for name in names]

    @property
    def cache_dir(self) -> Path:
        module, version = self.pinned
        digest = hashlib.sha256()  # of what builds: go.mod's comments left out
        digest.update(re.sub(r"(?m)^//.*\n", "", self._go_mod()).encode())
        digest.update((self.module_dir / "go.sum").read_bytes())
        return CACHE / f"{self.name}-{version}-{digest.hexdigest()[:8]}"

    def built(self) -> bool:
        return all((self.cache_dir / name).is_file() for name in self.commands)

    def build(self) -> float:
        """Build the group's commands into its cache folder; return the seconds it took."""
        started = time.monotonic()
        partial = self.cache_dir.with_name(self.cache_dir.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        command = [
            "go", "build", "-trimpath", "-ldflags", self._ldflags(), "-o", f"{partial}/",
            *self.tools,
        ]  # fmt: skip
        print(f"building {' '.join(self.commands)} into {self.cache_dir}", file=sys.stderr)
        subprocess.run(command, cwd=self.module_dir, check=True)
        for made, name in self.renamed:
            (partial / made).rename(partial / name)
        shutil.rmtree(self.cache_dir, ignore_errors=True)
        partial.rename(self.cache_dir)
        return time.monotonic() - started

    def _ldflags(self) -> str:
        flags = ["-s", "-w"]
        module, version = self.pinned
        if module == "k8s.io/kubernetes":
            major, minor = version.lstrip("v").split(".")[:2]
            for package in VERSION_PACKAGES:
                flags += [
                    f"-X {package}.gitVersion={version}",
                    f"-X {package}.gitMajor={major}",
                    f"-X {package}.gitMinor={minor}",
                    f"-X {package}.gitTreeState=clean",
                ]
        return " ".join(flags)


GROUPS = (Group("kubernetes"), Group("etcd", (("server", "etcd"),)), Group("crictl"))


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One build at a time on a machine (two test sessions would build twice)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_built() -> dict[str, float]:
    """Build every group that is missing; the seconds each build took, by group."""
    took: dict[str, float] = {}
    with _locked():
        for group in GROUPS:
            if not group.built():
                took[group.name] = group.build()
    return took


def path(command: str) -> Path:
    """The built binary ``command`` (its group built first if it is missing)."""
    for group in GROUPS:
        if command in group.commands:
            if not group.built():
                ensure_built()
            return group.cache_dir / command
    raise KeyError(f"no group in {BUILD_DIR} builds {command!r}")
