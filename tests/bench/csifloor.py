"""The storage figure's floor: a CSI driver's NodeStageVolume + NodePublishVolume made bare.

Through pkletd's own client (``pkletd.ipc.csi.client.CsiClient``) on the driver's socket,
on fresh volumes, with the paths laid out as pkletd lays them out (under a root of the
bench's own, so pkletd's housekeeping never sees them): the staging path
``<root>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount`` and the target
``<root>/pods/<uid>/volumes/kubernetes.io~csi/<volume>/mount``, their parent directories
made beforehand (not timed); the same volume capability pkletd sends for the bench's
PersistentVolumes (ext4, ReadWriteOnce). Nothing else: no capability query, no
``vol_data.json``, no API object.

``batch`` stages and publishes ``count`` volumes at once on ``threads`` threads, as a batch
of pods asks pkletd's pod workers for them; each volume's time is from the batch's start to
its publish, so it includes the wait for the driver (the test driver serves one volume
operation at a time). ``one_at_a_time`` is the driver's own cost of one volume. Both undo
what they did (unpublish, unstage; not timed).
"""

from __future__ import annotations

import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pkletd.ipc.apimodel.persistentvolumes import staging_dir_name
from pkletd.ipc.csi.client import CsiClient, VolumeAccess

ACCESS = VolumeAccess(fs_type="ext4", access_mode="SINGLE_NODE_WRITER")
VOLUME_NAME = "data"


@dataclass(frozen=True)
class BareVolume:
    handle: str
    staging: Path
    target: Path


class CsiFloor:
    """Bare volume calls to the driver ``driver`` serving on ``endpoint``."""

    def __init__(self, endpoint: Path, driver: str, root: Path) -> None:
        self._client = CsiClient(str(endpoint))
        self._driver = driver
        self._root = root
        self._made = 0

    def _fresh(self) -> BareVolume:
        self._made += 1
        handle = f"bare-{self._made:04d}"
        staging = (
            self._root
            / "plugins/kubernetes.io/csi"
            / self._driver
            / staging_dir_name(handle)
            / "globalmount"
        )
        target = self._root / "pods" / str(uuid.uuid4()) / "volumes/kubernetes.io~csi"
        target = target / VOLUME_NAME / "mount"
        staging.mkdir(parents=True)
        target.parent.mkdir(parents=True)
        return BareVolume(handle, staging, target)

    def _mount(self, volume: BareVolume) -> None:
        self._client.stage_volume(volume.handle, str(volume.staging), ACCESS, {}, {}, {})
        self._client.publish_volume(
            volume.handle, str(volume.staging), str(volume.target), ACCESS, False, {}, {}, {}
        )

    def _undo(self, volume: BareVolume) -> None:
        self._client.unpublish_volume(volume.handle, str(volume.target))
        self._client.unstage_volume(volume.handle, str(volume.staging))

    def one_at_a_time(self, count: int) -> list[float]:
        """Seconds of each volume's stage + publish, one volume after the other."""
        volumes = [self._fresh() for _ in range(count)]
        times = []
        for volume in volumes:
            t0 = time.perf_counter()
            self._mount(volume)
            times.append(time.perf_counter() - t0)
        self._undo_all(volumes)
        return times

    def batch(self, count: int, threads: int) -> list[float]:
        """Seconds from the batch's start to each volume's publish, all asked at once."""
        volumes = [self._fresh() for _ in range(count)]

        def mount(volume: BareVolume) -> float:
            self._mount(volume)
            return time.perf_counter() - t0

        with ThreadPoolExecutor(threads) as pool:
            t0 = time.perf_counter()
            times = list(pool.map(mount, volumes))
        self._undo_all(volumes)
        return times

    def _undo_all(self, volumes: list[BareVolume]) -> None:
        for volume in volumes:
            self._undo(volume)
        shutil.rmtree(self._root / "pods", ignore_errors=True)
        shutil.rmtree(self._root / "plugins", ignore_errors=True)

    def close(self) -> None:
        self._client.close()
