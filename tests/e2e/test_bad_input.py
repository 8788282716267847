"""Bad input gets a clear error naming the source and field; nothing else breaks."""

from __future__ import annotations

import socket
import subprocess
import urllib.error
import urllib.request

import msgpack
import pytest
import zmq
from pkletd.ipc.bus.messages import SCHEMA_VERSION
from pkletd.supervisor import cli

from tests.harness.node import PKLETD, Pkletd, pod_manifest, wait_for

pytestmark = pytest.mark.slow


def start_with(pkletd: Pkletd, text: str) -> subprocess.CompletedProcess[str]:
    pkletd.config.write_text(text)
    return subprocess.run(pkletd.args(), capture_output=True, text=True, timeout=60)


POD = "apiVersion: v1\nkind: Pod\n"
ONE = "spec: {containers: [{name: c, image: i}]}\n"
HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("staticPodPat: /tmp\n", 'unknown field "staticPodPat"; did you mean "staticPodPath"?'),
        ("fileCheckFrequency: 20x\n", 'field "fileCheckFrequency": invalid duration "20x"'),
        ("readOnlyPort: abc\n", 'field "readOnlyPort"'),
        ("syncFrequency: [1]\n", 'field "syncFrequency"'),
    ],
)
def test_bad_config_exits_2_naming_file_and_field(pkletd: Pkletd, body: str, needle: str) -> None:
    result = start_with(pkletd, HEADER + body)
    assert result.returncode == 2
    assert str(pkletd.config) in result.stderr
    assert needle in result.stderr


def test_missing_config_file_exits_2(pkletd: Pkletd) -> None:
    result = subprocess.run(
        [str(PKLETD), "start", "--config", "/nonexistent/kubelet.yaml"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "/nonexistent/kubelet.yaml: no such file" in result.stderr


def test_bad_flag_value_exits_2(pkletd: Pkletd) -> None:
    result = subprocess.run(
        [*pkletd.args(), "--sync-frequency", "soon"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--sync-frequency" in result.stderr


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("metadata: {name: x\n  spec: [", "not valid YAML or JSON"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: empty}\nspec: {}\n",
            "spec.containers: required value",
        ),
        (
            f"{POD}metadata: {{name: a}}\n{ONE}---\n{POD}metadata: {{name: b}}\n{ONE}",
            "want exactly one Pod per file, found 2 documents",
        ),
        (
            f"{POD}metadata: {{name: noimage}}\nspec: {{containers: [{{name: c}}]}}\n",
            "spec.containers[0].image",
        ),
    ],
)
def test_bad_manifest_is_reported_and_others_run(pkletd: Pkletd, text: str, reason: str) -> None:
    pkletd.put("good", pod_manifest("good"))
    bad = pkletd.put("bad", text)
    pkletd.start()
    pkletd.wait_running("good")
    line = wait_for(
        "rejection logged",
        lambda: [line for line in pkletd.log().splitlines() if "manifest rejected" in line],
    )
    assert f"path={bad}" in line[0] and reason in line[0]
    assert len(pkletd.pods()) == 1


def test_restart_unknown_worker_exits_2_with_names(pkletd: Pkletd) -> None:
    pkletd.start()
    result = pkletd.cli("restart-worker", "nosuch")
    assert result.returncode == 2
    assert "no worker named 'nosuch'" in result.stderr
    assert "workers are: eviction, file-source, http, image-gc, log-rotator, pleg" in result.stderr


def test_cli_without_a_running_pkletd_says_so(pkletd: Pkletd) -> None:
    result = pkletd.cli("status")
    assert result.returncode == 1
    assert (
        f"pkletd is not running (no control socket at {pkletd.run_dir}/control.sock)"
        in result.stderr
    )


def test_cli_usage_error_exits_2() -> None:
    result = subprocess.run([str(PKLETD), "frobnicate"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_garbage_on_the_bus_and_control_socket_is_dropped(pkletd: Pkletd) -> None:
    pkletd.start()
    ctx = zmq.Context()
    try:
        dealer = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 5000)  # deliver before close
        dealer.setsockopt(zmq.IDENTITY, b"pleg/1")
        dealer.connect(f"ipc://{pkletd.run_dir}/bus.sock")
        dealer.send(b"\xc1 not msgpack")
        dealer.send(msgpack.packb([SCHEMA_VERSION, "NoSuchKind", "pleg", 1, 0.0, {}]))
        dealer.send(msgpack.packb([SCHEMA_VERSION, "Heartbeat", "pleg", 1, 0.0, {"worker": 7}]))
        dealer.close()
        rogue = ctx.socket(zmq.DEALER)  # a pid in digits int() refuses: found by the soak
        rogue.setsockopt(zmq.LINGER, 5000)
        rogue.setsockopt(zmq.IDENTITY, "pleg/²".encode())
        rogue.connect(f"ipc://{pkletd.run_dir}/bus.sock")
        rogue.send(msgpack.packb([SCHEMA_VERSION, "Heartbeat", "pleg", 1, 0.0, {"worker": "x"}]))
        rogue.close()
    finally:
        ctx.term()
    log = wait_for(
        "bad frames logged",
        lambda: (
            pkletd.log().count("dropped bad bus message") >= 3
            and "stale worker identity=b'pleg/\\xc2\\xb2'" in pkletd.log()
            and pkletd.log()
        ),
    )
    assert "unknown kind 'NoSuchKind'" in log
    assert "Heartbeat field 'worker': int is not str" in log

    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(pkletd.run_dir / "control.sock"))
        sock.sendall(b"{not json\n")
        assert b"request is not JSON" in sock.recv(4096)
    reply = cli.request(str(pkletd.run_dir), {"command": "restart-worker", "name": ["pleg"]})
    assert reply == {"ok": False, "error": "restart-worker needs a worker name (a string)"}
    assert pkletd.all_running()


def test_bad_http_requests(pkletd: Pkletd) -> None:
    pkletd.start()
    base = f"http://127.0.0.1:{pkletd.read_only_port}"
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{base}/nope", timeout=5)
    missing.value.close()  # an HTTPError holds the response and its socket
    assert missing.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as wrong_method:
        urllib.request.urlopen(
            urllib.request.Request(f"{base}/pods", method="POST", data=b"x"), timeout=5
        )
    wrong_method.value.close()
    assert wrong_method.value.code == 405
    assert pkletd.all_running()
