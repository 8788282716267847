"""A plugin run as the kubelet's execPlugin runs it, with real (small) executables: the
request on stdin, the args and env, the response read; a plugin that fails, hangs, or
answers the wrong apiVersion or garbage gives the kubelet's error, never the garbage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pkletd.supervisor.credentialproviders.execplugin import (
    ExecPlugin,
    PluginFailed,
    Response,
    decode,
)
from pkletd.supervisor.credentialproviders.providerconfig import Provider
from pkletd.supervisor.pods.dockerconfig import Entry

from tests.supervisor.credentialproviders.plugin_helpers import V1, answer, runs, write_plugin

IMAGE = "registry.example:5000/team/app"


def plugin(tmp_path: Path, *env: tuple[str, str], timeout_s: float = 10.0) -> ExecPlugin:
    executable = write_plugin(tmp_path, "creds")
    log = ("PLUGIN_LOG", str(tmp_path / "runs.log"))
    config = Provider("creds", str(executable), ("*",), 60.0, V1, ("--flag",), (log, *env))
    return ExecPlugin(config, timeout_s)


def test_the_request_goes_on_stdin_and_the_response_is_read(tmp_path: Path) -> None:
    reply = answer({"registry.example:5000": ("u", "p")}, "Image", cacheDuration="90s")
    got = plugin(tmp_path, ("PLUGIN_ANSWER", reply)).run(IMAGE)

    assert got == Response("Image", 90.0, (Entry("registry.example:5000", "u", "p"),))
    assert runs(tmp_path / "runs.log") == [
        {
            "request": {"kind": "CredentialProviderRequest", "apiVersion": V1, "image": IMAGE},
            "args": ["--flag"],
        }
    ]


def test_a_failing_plugin_gives_its_exit_status_and_stderr(tmp_path: Path) -> None:
    with pytest.raises(PluginFailed) as failed:
        plugin(tmp_path, ("PLUGIN_EXIT", "3")).run(IMAGE)
    assert str(failed.value) == (
        f"error execing credential provider plugin creds for image {IMAGE}: exit status 3: "
        "no credentials for you"
    )


def test_a_plugin_that_hangs_is_killed_at_the_timeout(tmp_path: Path) -> None:
    write_plugin(tmp_path, "creds", "#!/bin/sh\nexec sleep 30\n")
    config = Provider("creds", str(tmp_path / "creds"), ("*",), 60.0, V1)
    with pytest.raises(PluginFailed) as failed:
        ExecPlugin(config, timeout_s=0.5).run(IMAGE)
    assert str(failed.value).endswith(f"for image {IMAGE}: context deadline exceeded")


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        (
            answer({}).replace(V1, "credentialprovider.kubelet.k8s.io/v1beta1"),
            "apiVersion from credential plugin response did not match expected apiVersion:"
            f"{V1}, actual apiVersion:credentialprovider.kubelet.k8s.io/v1beta1",
        ),
        ("password: hunter2", "error reading GVK from response: not a JSON object"),
        (
            answer({"r.example": ("u", "hunter2")}, cacheDuration="soon"),
            "error decoding credential provider plugin response from stdout",
        ),
        (
            answer({}, tokens="hunter2"),
            "error decoding credential provider plugin response from stdout",
        ),
        (
            json.dumps({"kind": "Secret", "apiVersion": V1, "auth": {}}),
            "error decoding credential provider plugin response from stdout",
        ),
    ],
)
def test_an_unusable_response_is_refused_without_quoting_it(stdout: str, message: str) -> None:
    with pytest.raises(PluginFailed) as failed:
        decode(stdout.encode(), V1)
    assert str(failed.value) == message
    assert "hunter2" not in str(failed.value)


def test_no_cache_duration_is_the_providers_default_and_a_negative_one_expires() -> None:
    assert decode(answer({}).encode(), V1).cache_duration is None
    assert decode(answer({}, cacheDuration="-1m").encode(), V1).cache_duration == -60.0
