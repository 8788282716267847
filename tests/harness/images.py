"""Local OCI images for the private containerd, built without any registry.

Two single-layer images are written as OCI image-layout tar archives and
imported with ``ctr images import``:

* ``BUSYBOX_IMAGE``: the host's static busybox with one symlink per applet,
  ``/tmp``, and an ``/etc/passwd`` with ``root`` and ``nobody`` (65534).
* ``PAUSE_IMAGE``: the host's static catatonit as ``/pause``, run as
  ``/pause -P`` (catatonit's pause mode), used as the CRI sandbox image.

Archives are deterministic (fixed mtimes, sorted entries, gzip without a
timestamp) and cached in a directory under a name derived from their inputs,
so they are built once per content of the host binaries.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import os
import platform
import subprocess
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUSYBOX_IMAGE = "pkletd.local/busybox:1"
PAUSE_IMAGE = "pkletd.local/pause:1"
ALL_IMAGES: tuple[str, ...] = (BUSYBOX_IMAGE, PAUSE_IMAGE)

HOST_BUSYBOX = Path("/bin/busybox")
HOST_CATATONIT = Path("/usr/bin/catatonit")
CRI_NAMESPACE = "k8s.io"

# Bump when the archive layout or image contents change, to invalidate caches.
_LAYOUT_VERSION = "1"
_EPOCH = "1970-01-01T00:00:00Z"

_MT_INDEX = "application/vnd.oci.image.index.v1+json"
_MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_MT_CONFIG = "application/vnd.oci.image.config.v1+json"
_MT_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
_ANN_REF_NAME = "org.opencontainers.image.ref.name"
_ANN_CONTAINERD_NAME = "io.containerd.image.name"

_PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
_GROUP = "root:x:0:\nnogroup:x:65534:\n"


class ImageImportError(RuntimeError):
    """Building or importing a harness image failed."""


@dataclass(frozen=True)
class LayerEntry:
    """One file system object in a layer; ``path`` is relative, without a leading slash."""

    path: str
    kind: str  # "dir", "file" or "symlink"
    mode: int = 0o755
    data: bytes = b""
    target: str = ""


@dataclass(frozen=True)
class ImageSpec:
    """What goes into one single-layer image."""

    name: str
    entries: tuple[LayerEntry, ...]
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Blob:
    data: bytes

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.data).hexdigest()

    def descriptor(self, media_type: str) -> dict[str, Any]:
        return {"mediaType": media_type, "digest": self.digest, "size": len(self.data)}


def host_arch() -> str:
    """The OCI architecture name of this machine."""
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    if arch is None:
        raise ImageImportError(f"unsupported host architecture {machine!r} (want amd64 or arm64)")
    return arch


def _read_host_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ImageImportError(f"cannot read {path} for the test images: {exc}") from exc


def busybox_applets(busybox: Path = HOST_BUSYBOX) -> list[str]:
    """Applet names reported by ``busybox --list`` (without ``busybox`` itself)."""
    try:
        out = subprocess.run(
            [str(busybox), "--list"], check=True, capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ImageImportError(f"`{busybox} --list` failed: {exc}") from exc
    return sorted({name for name in out.split() if name and name != "busybox" and "/" not in name})


def busybox_spec(busybox: Path = HOST_BUSYBOX) -> ImageSpec:
    entries = [
        LayerEntry("bin", "dir"),
        LayerEntry("bin/busybox", "file", 0o755, _read_host_file(busybox)),
        *(
            LayerEntry(f"bin/{applet}", "symlink", 0o777, target="busybox")
            for applet in busybox_applets(busybox)
        ),
        LayerEntry("etc", "dir"),
        LayerEntry("etc/passwd", "file", 0o644, _PASSWD.encode()),
        LayerEntry("etc/group", "file", 0o644, _GROUP.encode()),
        LayerEntry("root", "dir", 0o700),
        LayerEntry("tmp", "dir", 0o1777),
    ]
    config = {"Env": ["PATH=/bin"], "Cmd": ["sh"], "WorkingDir": "/"}
    return ImageSpec(BUSYBOX_IMAGE, tuple(entries), config)


def pause_spec(catatonit: Path = HOST_CATATONIT) -> ImageSpec:
    entries = (LayerEntry("pause", "file", 0o755, _read_host_file(catatonit)),)
    config = {"Env": ["PATH=/"], "Entrypoint": ["/pause", "-P"], "WorkingDir": "/"}
    return ImageSpec(PAUSE_IMAGE, entries, config)


def _tar_info(entry: LayerEntry) -> tarfile.TarInfo:
    info = tarfile.TarInfo(entry.path)
    info.mode = entry.mode
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    if entry.kind == "dir":
        info.type = tarfile.DIRTYPE
    elif entry.kind == "symlink":
        info.type = tarfile.SYMTYPE
        info.linkname = entry.target
    elif entry.kind == "file":
        info.type = tarfile.REGTYPE
        info.size = len(entry.data)
    else:
        raise ValueError(f"unknown layer entry kind {entry.kind!r} for {entry.path}")
    return info


def _build_tar(entries: Iterable[LayerEntry]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in sorted(entries, key=lambda e: e.path):
            data = io.BytesIO(entry.data) if entry.kind == "file" else None
            tar.addfile(_tar_info(entry), data)
    return buf.getvalue()


def _json_blob(obj: Any) -> _Blob:
    return _Blob(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())


def build_layout(spec: ImageSpec, arch: str) -> dict[str, bytes]:
    """The files of an OCI image layout for ``spec``: relative path -> content."""
    layer_tar = _build_tar(spec.entries)
    layer = _Blob(gzip.compress(layer_tar, compresslevel=6, mtime=0))
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    config = _json_blob(
        {
            "created": _EPOCH,
            "architecture": arch,
            "os": "linux",
            "config": spec.config,
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created": _EPOCH, "created_by": "pkletd tests/harness/images.py"}],
        }
    )
    manifest = _json_blob(
        {
            "schemaVersion": 2,
            "mediaType": _MT_MANIFEST,
            "config": config.descriptor(_MT_CONFIG),
            "layers": [layer.descriptor(_MT_LAYER)],
        }
    )
    tag = spec.name.rsplit(":", 1)[1]
    index_entry = manifest.descriptor(_MT_MANIFEST)
    index_entry["platform"] = {"architecture": arch, "os": "linux"}
    index_entry["annotations"] = {_ANN_REF_NAME: tag, _ANN_CONTAINERD_NAME: spec.name}
    index = {"schemaVersion": 2, "mediaType": _MT_INDEX, "manifests": [index_entry]}
    files = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index, sort_keys=True).encode(),
    }
    for blob in (layer, config, manifest):
        files["blobs/sha256/" + blob.digest.split(":", 1)[1]] = blob.data
    return files


def labelled_busybox(label: str) -> dict[str, bytes]:
    """The busybox image as an OCI layout (``build_layout``), with ``label`` in its config:
    an image of its own (its own id and manifest digest) that shares busybox's layer."""
    spec = busybox_spec()
    config = {**spec.config, "Labels": {"pkletd.test/image": label}}
    return build_layout(dataclasses.replace(spec, config=config), host_arch())


def _write_archive(files: dict[str, bytes], dest: Path) -> None:
    """Write ``files`` as an uncompressed tar to ``dest`` atomically."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    dirs = sorted({str(Path(p).parent) for p in files if "/" in p} | {"blobs"})
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in dirs:
            tar.addfile(_tar_info(LayerEntry(d, "dir")))
        for path in sorted(files):
            entry = LayerEntry(path, "file", 0o644, files[path])
            tar.addfile(_tar_info(entry), io.BytesIO(entry.data))
    tmp.replace(dest)


def _cache_key(spec_inputs: Iterable[bytes], name: str, arch: str) -> str:
    h = hashlib.sha256(f"{_LAYOUT_VERSION}\0{name}\0{arch}\0".encode())
    for chunk in spec_inputs:
        h.update(hashlib.sha256(chunk).digest())
    return h.hexdigest()[:20]


def build_archives(cache_dir: Path) -> dict[str, Path]:
    """Build (or reuse from ``cache_dir``) one archive per image: image name -> path."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    arch = host_arch()
    archives: dict[str, Path] = {}
    for spec in (busybox_spec(), pause_spec()):
        inputs = [e.path.encode() + b"\0" + e.data + e.target.encode() for e in spec.entries]
        inputs.append(json.dumps(spec.config, sort_keys=True).encode())
        slug = spec.name.replace("/", "_").replace(":", "_")
        dest = cache_dir / f"{slug}-{arch}-{_cache_key(inputs, spec.name, arch)}.oci.tar"
        if not dest.is_file():
            _write_archive(build_layout(spec, arch), dest)
        archives[spec.name] = dest
    return archives


def _ctr(address: str, *args: str, timeout: float = 120.0) -> str:
    cmd = ["ctr", "--address", address, "--namespace", CRI_NAMESPACE, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ImageImportError(f"`{' '.join(cmd)}` failed: {exc}") from exc
    if proc.returncode != 0:
        output = proc.stderr.strip() or proc.stdout.strip()
        raise ImageImportError(f"`{' '.join(cmd)}` exited {proc.returncode}: {output}")
    return proc.stdout


def list_image_names(address: str) -> set[str]:
    """Image names in containerd's ``k8s.io`` namespace (``address`` is the raw socket path)."""
    return set(_ctr(address, "images", "ls", "-q").split())


def import_busybox_copy(address: str, name: str, cache_dir: Path) -> None:
    """Import the busybox image again under ``name`` (``host/repo:tag``), with a file of
    its own (``/image-name``) so it is an image of its own: its own id and layer."""
    spec = busybox_spec()
    entries = (*spec.entries, LayerEntry("image-name", "file", 0o644, name.encode()))
    files = build_layout(dataclasses.replace(spec, name=name, entries=entries), host_arch())
    cache_dir.mkdir(parents=True, exist_ok=True)
    dest = cache_dir / f"{name.replace('/', '_').replace(':', '_')}.oci.tar"
    _write_archive(files, dest)
    _ctr(address, "images", "import", "--platform", f"linux/{host_arch()}", str(dest))


def remove_image(address: str, name: str) -> None:
    """Remove an image by name from containerd's ``k8s.io`` namespace, if it is there."""
    if name in list_image_names(address):
        _ctr(address, "images", "rm", name)


def import_images(address: str, cache_dir: Path) -> None:
    """Build the harness images once and import them into containerd at ``address``.

    ``address`` is the raw socket path (as ``ctr --address`` takes it).
    """
    for name, archive in build_archives(cache_dir).items():
        _ctr(address, "images", "import", "--platform", f"linux/{host_arch()}", str(archive))
        if name not in list_image_names(address):
            raise ImageImportError(
                f"imported {archive} but {name} is not listed by `ctr images ls`"
            )
