"""Which packages the wheel holds, found in the tree (pyproject.toml has the rest).

Each top folder installs as ``pkletd.<top>`` with every package under it (a folder
with an ``__init__.py``), so a new subpackage needs no list to be added to. ``etc/``
installs as ``pkletd.etc``: the systemd unit, the default config and the demo
manifests as its data.
"""

from setuptools import find_packages, setup

TOPS = ("supervisor", "workers", "ipc", "etc")


def packages(top: str) -> list[str]:
    return [f"pkletd.{top}", *(f"pkletd.{top}.{name}" for name in find_packages(top))]


setup(
    packages=[name for top in TOPS for name in packages(top)],
    package_dir={f"pkletd.{top}": top for top in TOPS},
)
