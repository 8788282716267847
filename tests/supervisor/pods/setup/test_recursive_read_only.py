"""recursiveReadOnly on a runtime without recursive read-only mounts (containerd 1.6), as the
kubelet treats it: IfPossible is a plain read-only mount, Enabled fails the container with
the kubelet's message; and the API's checks of the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.setup.envvars import ConfigError
from pkletd.supervisor.pods.setup.volumes import PodVolumes


def pod(**mount: Any) -> Any:
    return parse_pod(
        {
            "metadata": {"name": "p", "uid": "uid-1"},
            "spec": {
                "volumes": [{"name": "v", "emptyDir": {}}],
                "containers": [
                    {
                        "name": "c",
                        "image": "x",
                        "volumeMounts": [{"name": "v", "mountPath": "/m", **mount}],
                    }
                ],
            },
        }
    )


def test_if_possible_is_read_only_and_enabled_fails(tmp_path: Path) -> None:
    volumes = PodVolumes(NodeInfo("n", (), tmp_path), ApiObjects(standalone=True))
    possible = pod(readOnly=True, recursiveReadOnly="IfPossible")
    volumes.setup(possible)
    (mount,) = volumes.mounts(possible, possible.containers[0], [])
    assert mount.readonly
    enabled = pod(readOnly=True, recursiveReadOnly="Enabled")
    with pytest.raises(ConfigError) as error:
        volumes.mounts(enabled, enabled.containers[0], [])
    assert str(error.value) == (
        'failed to resolve recursive read-only mode: volume "v" requested recursive read-only '
        "mode, but it is not supported by the runtime"
    )
    disabled = pod(recursiveReadOnly="Disabled")
    (mount,) = volumes.mounts(disabled, disabled.containers[0], [])
    assert not mount.readonly


@pytest.mark.parametrize(
    ("mount", "message"),
    [
        (
            {"recursiveReadOnly": "Enabled"},
            "spec.containers[0].volumeMounts[0].recursiveReadOnly: forbidden: may only be "
            "specified when readOnly is true",
        ),
        (
            {
                "readOnly": True,
                "recursiveReadOnly": "IfPossible",
                "mountPropagation": "HostToContainer",
            },
            "recursiveReadOnly: forbidden: may only be specified when mountPropagation is None",
        ),
        (
            {"readOnly": True, "recursiveReadOnly": "Always"},
            "spec.containers[0].volumeMounts[0].recursiveReadOnly: unsupported value 'Always'",
        ),
    ],
)
def test_the_api_checks(mount: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidPod) as error:
        pod(**mount)
    assert message in str(error.value)
