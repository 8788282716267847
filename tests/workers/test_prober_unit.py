"""The prober's pure parts: threshold counting, handlers on loopback, results, metrics text."""

from __future__ import annotations

import http.server
import select
import threading
import time
from collections.abc import Iterator

import pytest
from pkletd.ipc.apimodel.podspec import parse_pod
from pkletd.ipc.apimodel.probespec import InvalidProbe, Probe, ProbeType, parse_probes
from pkletd.ipc.bus.messages import PodStatusUpdated, ProbeResult
from pkletd.ipc.bus.sender import FakeSender
from pkletd.ipc.runtime import handlers
from pkletd.ipc.runtime.cri import ExecResult
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.workers.http import metrics_text
from pkletd.workers.prober import FAILURE, SUCCESS, Metrics, Prober, Schedule
from prometheus_client.parser import text_string_to_metric_families


def schedule(kind: str = "readiness", success: int = 1, failure: int = 3) -> Schedule:
    probe = Probe(
        ProbeType(kind), "tcpSocket", port=1, success_threshold=success, failure_threshold=failure
    )
    target = handlers.Target(container(), "cid", "127.0.0.1")
    return Schedule(
        ("uid", "c", ProbeType(kind)), probe, target, ("default", "web"), due=0.0, result=FAILURE
    )


def container(**extra: object) -> object:
    pod = parse_pod(
        {
            "metadata": {"name": "web", "uid": "uid"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "i",
                        "ports": [{"name": "http", "containerPort": 8080}],
                        **extra,
                    }
                ]
            },
        }
    )
    return pod.containers[0]


def test_result_flips_only_at_the_thresholds() -> None:
    s = schedule(success=2, failure=3)
    s.record(True)
    assert s.result == FAILURE  # one success of two
    s.record(True)
    assert s.result == SUCCESS
    s.record(False)
    s.record(False)
    assert s.result == SUCCESS  # two failures of three
    s.record(True)
    s.record(False)
    s.record(False)
    assert s.result == SUCCESS  # the success reset the count
    s.record(False)
    assert s.result == FAILURE and not s.on_hold  # readiness keeps probing


def test_liveness_failure_holds_until_the_container_is_replaced() -> None:
    s = schedule("liveness", failure=1)
    s.record(False)
    assert s.result == FAILURE and s.on_hold


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"livenessProbe": {}}, "livenessProbe: must specify exactly one handler"),
        (
            {"livenessProbe": {"exec": {"command": ["x"]}, "tcpSocket": {"port": 1}}},
            "exactly one handler",
        ),
        (
            {"livenessProbe": {"exec": {"command": ["x"]}, "successThreshold": 2}},
            "must be 1 for liveness",
        ),
        ({"readinessProbe": {"httpGet": {"port": 70000}}}, "readinessProbe.httpGet.port"),
        ({"startupProbe": {"grpc": {"port": "named"}}}, "startupProbe.grpc.port"),
        ({"readinessProbe": {"exec": {"command": []}}}, "readinessProbe.exec.command"),
        (
            {"readinessProbe": {"tcpSocket": {"port": 1}, "periodSeconds": -1}},
            "readinessProbe.periodSeconds",
        ),
    ],
)
def test_bad_probes_name_the_field(spec: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidProbe, match=message.replace(".", r"\.")):
        parse_probes(spec, "spec.containers[0]")


def test_probe_defaults_are_the_apis() -> None:
    (probe,) = parse_probes({"livenessProbe": {"tcpSocket": {"port": "http"}}}, "c")
    assert (probe.period_s, probe.timeout_s, probe.success_threshold, probe.failure_threshold) == (
        10,
        1,
        1,
        3,
    )
    assert probe.initial_delay_s == 0 and probe.port == "http"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        routes = {
            "/ok": (200, {}),
            "/fail": (503, {}),
            "/hop": (302, {"Location": "/ok"}),
            "/away": (302, {"Location": "http://192.0.2.1/elsewhere"}),
            "/loop": (302, {"Location": "/loop"}),
        }
        status, headers = routes.get(self.path, (404, {}))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        body = f"{self.headers.get('User-Agent')} {self.headers.get('X-Probe', '')}".encode()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def run_http(port: int, path: str, **extra: object) -> handlers.Outcome:
    probe = Probe(ProbeType.READINESS, "httpGet", port=port, path=path, timeout_s=2, **extra)  # type: ignore[arg-type]
    return handlers.run(probe, handlers.Target(container(), "cid", "127.0.0.1"), FakeRuntime())


def test_http_status_codes_and_headers(web: int) -> None:
    ok = run_http(web, "/ok", headers=(("X-Probe", "yes"),))
    assert ok.ok and ok.output.startswith("kube-probe/") and ok.output.endswith(" yes")
    failed = run_http(web, "/fail")
    assert not failed.ok and failed.output == "HTTP probe failed with statuscode: 503"


def test_http_redirects_same_host_followed_other_host_not_contacted(web: int) -> None:
    assert run_http(web, "/hop").ok
    away = run_http(web, "/away")
    assert away.ok and away.output.startswith("Probe terminated redirects")
    loop = run_http(web, "/loop")
    assert not loop.ok and "redirects" in loop.output


def test_probe_never_goes_off_the_pod(web: int) -> None:
    outcome = run_http(web, "/ok", host="192.0.2.1")
    assert not outcome.ok and "not the pod's address" in outcome.output


def test_tcp_open_and_closed(web: int) -> None:
    target = handlers.Target(container(), "cid", "127.0.0.1")
    assert handlers.run(Probe(ProbeType.LIVENESS, "tcpSocket", port=web), target, FakeRuntime()).ok
    closed = handlers.run(Probe(ProbeType.LIVENESS, "tcpSocket", port=1), target, FakeRuntime())
    assert not closed.ok and "dial tcp 127.0.0.1:1" in closed.output


def test_unknown_named_port_fails_clearly() -> None:
    target = handlers.Target(container(), "cid", "127.0.0.1")
    outcome = handlers.run(
        Probe(ProbeType.LIVENESS, "tcpSocket", port="nope"), target, FakeRuntime()
    )
    assert not outcome.ok and "no port named 'nope'" in outcome.output


def result(result: str, container_id: str = "cid", probe: str = "readiness") -> ProbeResult:
    return ProbeResult("uid", "c", container_id, probe, result, 1, 0, "")


def test_results_count_only_for_their_container_instance() -> None:
    results = ProbeResults()
    c = container(readinessProbe={"exec": {"command": ["true"]}})
    assert not results.ready("uid", c, "cid")  # not ready until the probe passes
    assert results.record(result(SUCCESS))
    assert results.ready("uid", c, "cid")
    assert not results.ready("uid", c, "other")  # a new container starts over
    assert not results.record(result(SUCCESS))  # no change, nothing to act on
    assert results.record(result(SUCCESS, "other"))


def test_metrics_text_parses_with_prometheus() -> None:
    metrics = Metrics()
    s = schedule()
    metrics.count(s, SUCCESS, 0.003)
    metrics.count(s, SUCCESS, 0.2)
    metrics.count(s, FAILURE, 3.0)
    families = {f.name: f for f in text_string_to_metric_families(metrics_text(metrics.samples()))}
    totals = {s.labels["result"]: s.value for s in families["prober_probe"].samples}
    assert totals == {"successful": 2, "failed": 1}
    buckets = {
        s.labels["le"]: s.value
        for s in families["pkletd_prober_lateness_seconds"].samples
        if s.name.endswith("_bucket")
    }
    assert buckets["0.005"] == 1 and buckets["0.25"] == 2 and buckets["+Inf"] == 3


class Exec:
    """An exec that answers ``exit_code`` at once."""

    exit_code = 0

    def exec_sync(self, container_id: str, command: tuple[str, ...], timeout_s: int) -> ExecResult:
        return ExecResult(self.exit_code, b"", b"")

    def close(self) -> None:
        pass


def probed_pod() -> dict[str, object]:
    probe = {"exec": {"command": ["true"]}, "periodSeconds": 1, "failureThreshold": 2}
    state = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    return {
        "metadata": {"name": "web", "namespace": "default", "uid": "uid"},
        "spec": {"containers": [{"name": "c", "image": "i", "livenessProbe": probe}]},
        "status": {
            "podIP": "10.0.0.5",
            "containerStatuses": [{"name": "c", "containerID": "containerd://cid", "state": state}],
        },
    }


def run_once(prober: Prober, at: float) -> None:
    """One turn at ``at``: the due probe is launched, its outcome taken in."""
    prober.tick(at)
    (fd,) = prober.fds()
    ready, _, _ = select.select([fd], [], [], 5.0)
    assert ready, "the probe did not finish"
    prober.on_readable(fd)


def test_a_run_that_changes_nothing_is_not_reported_again() -> None:
    """The parent hears a result when it or the counts (up to the thresholds) change, or
    after RESEND_S: not 220 messages a second for 110 pods' unchanged probes."""
    runtime, bus = Exec(), FakeSender()
    prober = Prober(runtime, bus)  # type: ignore[arg-type]
    try:
        prober.on_broadcast(PodStatusUpdated(probed_pod()))
        start = time.monotonic()
        for i in range(4):
            run_once(prober, start + i)
        runtime.exit_code = 1
        for i in range(4, 6):
            run_once(prober, start + i)
        sent = [m for m in bus.sent if isinstance(m, ProbeResult)]
        assert [(m.result, m.successes, m.failures) for m in sent] == [
            (SUCCESS, 1, 0),  # the first run of a container
            (SUCCESS, 0, 1),
            (FAILURE, 0, 2),  # liveness failed: held until the container is replaced
        ]
        prober.tick(start + 10)
        assert prober.tick(start + 10) >= start + 10  # nothing is due while it holds
    finally:
        prober.close()
