"""The kubelet API's parts without a server: the path-to-attributes mapping, the review
cache, authentication's order, CRI log reading, the log query and which file it reads,
the self-signed certificate and the TLS names."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import os
import ssl
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from pkletd.ipc import tlsnames
from pkletd.ipc.clock import FakeClock
from pkletd.workers.http import authz, crilog, selfsigned
from pkletd.workers.http.authn import (
    ANONYMOUS,
    Authenticator,
    TokenAuthenticator,
    Unauthenticated,
    User,
    bearer_token,
    user_from_certificate,
)
from pkletd.workers.http.containerlogs import BadQuery, NoLogs, log_options, pick_instance
from pkletd.workers.http.reviews import FakeReviewer, ReviewUnavailable
from pkletd.workers.http.ttlcache import TtlCache

# --- authorization attributes ------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "subresources"),
    [
        ("/stats/summary", ["stats"]),
        ("/stats", ["stats"]),
        ("/metrics", ["metrics"]),
        ("/metrics/probes", ["metrics"]),
        ("/metricsz", ["proxy"]),
        ("/logs/", ["log"]),
        ("/logs/syslog", ["log"]),
        ("/checkpoint/ns/pod/c", ["checkpoint"]),
        ("/pods", ["pods", "proxy"]),
        ("/pods/", ["pods", "proxy"]),
        ("/podsx", ["proxy"]),
        ("/runningpods/", ["pods", "proxy"]),
        ("/healthz", ["healthz", "proxy"]),
        ("/healthz/syncloop", ["healthz", "proxy"]),
        ("/configz", ["configz", "proxy"]),
        ("/containerLogs/ns/pod/c", ["proxy"]),
        ("/exec/ns/pod/c", ["proxy"]),
        ("/spec/", ["proxy"]),
        ("/", ["proxy"]),
    ],
)
def test_subresources_by_path_as_the_kubelet_maps_them(path: str, subresources: list[str]) -> None:
    assert authz.subresources(path) == subresources


@pytest.mark.parametrize(
    ("method", "verb"),
    [("GET", "get"), ("POST", "create"), ("PUT", "update"), ("PATCH", "patch"),
     ("DELETE", "delete"), ("HEAD", "")],
)  # fmt: skip
def test_verbs_by_method(method: str, verb: str) -> None:
    (attrs,) = authz.attributes(User("u"), method, "/exec/a/b/c", "n1")
    assert attrs.verb == verb


def test_review_spec_and_messages() -> None:
    user = User("bob", ("dev", "system:authenticated"), "u-1", (("scope", ("a", "b")),))
    pods, proxy = authz.attributes(user, "GET", "/pods", "node-a")
    assert pods.review_spec() == {
        "user": "bob",
        "uid": "u-1",
        "groups": ["dev", "system:authenticated"],
        "extra": {"scope": ["a", "b"]},
        "resourceAttributes": {
            "verb": "get",
            "version": "v1",
            "resource": "nodes",
            "subresource": "pods",
            "name": "node-a",
        },
    }
    assert proxy.forbidden() == "Forbidden (user=bob, verb=get, resource=nodes, subresource=proxy)"
    assert proxy.error() == (
        "Authorization error (user=bob, verb=get, resource=nodes, subresource=proxy)"
    )


def test_webhook_authorizer_caches_allowed_and_denied_answers_apart() -> None:
    reviewer = FakeReviewer(allow=lambda spec: spec["user"] == "alice")

    async def offload(call: Any) -> Any:
        return call()

    async def run() -> None:
        authorizer = authz.WebhookAuthorizer(reviewer, offload, 300.0, 30.0)
        for name in ("alice", "alice", "mallory", "mallory"):
            (attrs,) = authz.attributes(User(name), "GET", "/spec/", "n")
            assert await authorizer.authorize(attrs) == (name == "alice")

    asyncio.run(run())
    assert reviewer.count("SubjectAccessReview") == 2


# --- the review cache ----------------------------------------------------------------------


def test_ttl_cache_keeps_answers_for_their_ttl_and_not_errors() -> None:
    clock = FakeClock(mono=100.0)
    cache: TtlCache[str, bool] = TtlCache(lambda ok: 10.0 if ok else 1.0, clock=clock)
    calls: list[str] = []

    async def answer(key: str, value: bool) -> bool:
        calls.append(key)
        return value

    async def fail() -> bool:
        calls.append("fail")
        raise ReviewUnavailable("down")

    async def run() -> None:
        assert await cache.get("yes", lambda: answer("yes", True))
        assert await cache.get("yes", lambda: answer("yes", True))
        assert not await cache.get("no", lambda: answer("no", False))
        clock.mono += 2
        assert not await cache.get("no", lambda: answer("no", False))  # 1 s: asked again
        assert await cache.get("yes", lambda: answer("yes", True))  # 10 s: still cached
        for _ in range(2):
            with pytest.raises(ReviewUnavailable):
                await cache.get("err", fail)

    asyncio.run(run())
    assert calls == ["yes", "no", "no", "fail", "fail"]


def test_ttl_cache_asks_once_for_concurrent_callers() -> None:
    cache: TtlCache[str, int] = TtlCache(lambda _: 10.0)
    calls = 0

    async def slow() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return 7

    async def run() -> list[int]:
        return await asyncio.gather(*(cache.get("k", slow) for _ in range(20)))

    assert asyncio.run(run()) == [7] * 20
    assert calls == 1


def test_ttl_cache_is_bounded() -> None:
    cache: TtlCache[int, int] = TtlCache(lambda _: 10.0, max_entries=3)

    async def value(n: int) -> int:
        return n

    async def run() -> None:
        for n in range(10):
            await cache.get(n, lambda n=n: value(n))  # type: ignore[misc]

    asyncio.run(run())
    assert len(cache) == 3


# --- authentication ----------------------------------------------------------------------------


def test_user_from_certificate_and_bearer_header() -> None:
    peer = {
        "subject": (
            (("organizationName", "system:nodes"),),
            (("organizationName", "ops"),),
            (("commonName", "system:node:n1"),),
        )
    }
    assert user_from_certificate(peer) == User("system:node:n1", ("system:nodes", "ops"))
    assert user_from_certificate({}) is None
    assert bearer_token("Bearer abc ") == "abc"
    assert bearer_token("bearer abc") == "abc"
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer ") is None
    assert bearer_token(None) is None


def _authenticator(reviewer: FakeReviewer, anonymous: bool) -> Authenticator:
    async def offload(call: Any) -> Any:
        return call()

    return Authenticator(TokenAuthenticator(reviewer, offload, 120.0), anonymous)


CERT = {"subject": ((("commonName", "carol"),),)}


@pytest.mark.parametrize("anonymous", [False, True])
def test_authentication_order_and_failures(anonymous: bool) -> None:
    reviewer = FakeReviewer(tokens={"good": {"username": "bob", "groups": ["dev"]}})
    authn = _authenticator(reviewer, anonymous)

    async def run() -> None:
        carol = await authn.authenticate(CERT, "Bearer good")
        assert carol == User("carol", ("system:authenticated",))
        bob = await authn.authenticate(None, "Bearer good")
        assert bob == User("bob", ("dev", "system:authenticated"))
        with pytest.raises(Unauthenticated, match="invalid bearer token"):
            await authn.authenticate(None, "Bearer bad")  # even with anonymous on
        reviewer.down = True
        with pytest.raises(Unauthenticated, match="token review failed"):
            await authn.authenticate(None, "Bearer other")
        assert await authn.authenticate(None, "Bearer good") == bob  # cached
        if anonymous:
            assert await authn.authenticate(None, None) == ANONYMOUS
        else:
            with pytest.raises(Unauthenticated):
                await authn.authenticate(None, None)

    asyncio.run(run())
    assert reviewer.count("TokenReview") == 3


def test_tokens_are_ignored_without_the_webhook() -> None:
    async def run() -> User:
        return await Authenticator(None, anonymous=True).authenticate(None, "Bearer x")

    assert asyncio.run(run()) == ANONYMOUS


# --- CRI logs -------------------------------------------------------------------------------------

T0 = "2024-05-01T10:00:00.000000001Z"


def cri(stamp: str, text: str, stream: str = "stdout", tag: str = "F") -> bytes:
    return f"{stamp} {stream} {tag} {text}\n".encode()


def at(seconds: int) -> str:
    return f"2024-05-01T10:00:{seconds:02d}.5Z"


def test_stamp_ns_reads_rfc3339_with_nanoseconds_and_offsets() -> None:
    base = int(dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC).timestamp()) * 10**9
    assert crilog.stamp_ns(T0.encode()) == base + 1
    assert crilog.stamp_ns(b"2024-05-01T12:00:00+02:00") == base
    assert crilog.stamp_ns(b"2024-05-01T10:00:00.5Z") == base + 500_000_000
    assert crilog.stamp_ns(b"yesterday") is None


def test_parse_line() -> None:
    line = crilog.parse_line(cri(T0, "hello world").rstrip(b"\n"))
    assert line is not None
    assert (line.stream, line.full, line.content) == (b"stdout", True, b"hello world")
    partial = crilog.parse_line(b"2024-05-01T10:00:00Z stderr P:x part")
    assert partial is not None and not partial.full and partial.content == b"part"
    assert crilog.parse_line(b"2024-05-01T10:00:00Z stdout F") is not None  # empty line
    for bad in (b"", b"garbage", b"2024-05-01T10:00:00Z stdin F x", b"now stdout F x"):
        assert crilog.parse_line(bad) is None


def read_log(path: Path, options: crilog.LogOptions, running: Any = lambda: False) -> bytes:
    out = bytearray()

    async def write(data: bytes) -> None:
        out.extend(data)

    async def run() -> None:
        reader = crilog.LogReader(str(path), options, running)
        await reader.copy(reader.open(), write)

    asyncio.run(run())
    return bytes(out)


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "0.log"
    path.write_bytes(
        cri(at(1), "one")
        + cri(at(2), "two", "stderr")
        + b"not a cri line\n"
        + cri(at(3), "thr", tag="P")
        + cri(at(3), "ee")
        + cri(at(4), "four")
    )
    return path


def test_read_whole_log(log_file: Path) -> None:
    assert read_log(log_file, crilog.LogOptions()) == b"one\ntwo\nthree\nfour\n"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (crilog.LogOptions(tail_lines=2), b"ee\nfour\n"),
        (crilog.LogOptions(tail_lines=0), b""),
        (crilog.LogOptions(tail_lines=100), b"one\ntwo\nthree\nfour\n"),
        (crilog.LogOptions(limit_bytes=6), b"one\ntw"),
        (crilog.LogOptions(since_ns=crilog.stamp_ns(at(3).encode())), b"three\nfour\n"),
        (
            crilog.LogOptions(timestamps=True, tail_lines=1),
            f"{at(4)} four\n".encode(),
        ),
        (
            crilog.LogOptions(timestamps=True, limit_bytes=30),
            f"{at(1)} one\n{at(2)} ".encode()[:30],
        ),
    ],
)
def test_read_log_options(log_file: Path, options: crilog.LogOptions, expected: bytes) -> None:
    assert read_log(log_file, options) == expected


def test_tail_offset_counts_newlines_from_the_end() -> None:
    data = b"".join(b"line %d\n" % n for n in range(5000))
    f = io.BytesIO(data)
    assert data[crilog.tail_offset(f, 3) :] == b"line 4997\nline 4998\nline 4999\n"
    assert crilog.tail_offset(f, 10_000) == 0


def test_an_incomplete_last_line_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    path.write_bytes(cri(at(1), "done") + b"2024-05-01T10:00:02Z stdout F half-writ")
    assert read_log(path, crilog.LogOptions()) == b"done\n"


def test_follow_reads_what_comes_then_stops_with_the_container(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    path.write_bytes(cri(at(1), "first"))
    out = bytearray()
    running = True

    async def write(data: bytes) -> None:
        out.extend(data)

    async def run() -> None:
        nonlocal running
        reader = crilog.LogReader(str(path), crilog.LogOptions(follow=True), lambda: running)
        task = asyncio.create_task(reader.copy(reader.open(), write))
        await _until(lambda: out == b"first\n")
        with path.open("ab") as f:
            f.write(cri(at(2), "second")[:20])  # half a line: held back
            f.flush()
            await asyncio.sleep(crilog.POLL_S * 2)
            assert out == b"first\n"
            f.write(cri(at(2), "second")[20:])
        await _until(lambda: out == b"first\nsecond\n")
        path.rename(tmp_path / "0.log.20240501-100003")  # rotated
        path.write_bytes(cri(at(4), "third"))
        await _until(lambda: out == b"first\nsecond\nthird\n")
        with path.open("ab") as f:
            f.write(cri(at(5), "last words"))
        running = False
        await asyncio.wait_for(task, 5)

    asyncio.run(run())
    assert out == b"first\nsecond\nthird\nlast words\n"


async def _until(check: Any, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


# --- the log query, and which instance -------------------------------------------------------

NOW = 1_714_557_600 * 10**9


@pytest.mark.parametrize(
    ("query", "options", "previous"),
    [
        ({}, crilog.LogOptions(), False),
        ({"follow": "true", "previous": "1"}, crilog.LogOptions(follow=True), True),
        ({"follow": "false", "timestamps": "F"}, crilog.LogOptions(), False),
        ({"follow": ""}, crilog.LogOptions(follow=True), False),  # as the API decodes it
        ({"tailLines": "5"}, crilog.LogOptions(tail_lines=5), False),
        ({"tail": "7"}, crilog.LogOptions(tail_lines=7), False),
        ({"tail": "all", "tailLines": "3"}, crilog.LogOptions(), False),
        ({"limitBytes": "10"}, crilog.LogOptions(limit_bytes=10), False),
        ({"sinceSeconds": "60"}, crilog.LogOptions(since_ns=NOW - 60 * 10**9), False),
        (
            {"sinceTime": "2024-05-01T10:00:00Z"},
            crilog.LogOptions(since_ns=NOW),
            False,
        ),
    ],
)
def test_log_options(query: dict[str, str], options: crilog.LogOptions, previous: bool) -> None:
    assert log_options(query, NOW) == (options, previous)


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ({"tailLines": "x"}, 400),
        ({"tail": "-"}, 400),
        ({"limitBytes": ""}, 400),
        ({"sinceTime": "yesterday"}, 400),
        ({"tailLines": "-1"}, 422),
        ({"limitBytes": "0"}, 422),
        ({"sinceSeconds": "0"}, 422),
        ({"sinceSeconds": "5", "sinceTime": "2024-05-01T10:00:00Z"}, 422),
    ],
)
def test_bad_log_queries(query: dict[str, str], status: int) -> None:
    with pytest.raises(BadQuery) as info:
        log_options(query, NOW)
    assert info.value.status == status
    message = "Unable to decode query." if status == 400 else "Invalid request."
    assert str(info.value) == f'{{"message": "{message}"}}'


RUNNING = {"running": {"startedAt": "x"}}
ENDED = {"terminated": {"exitCode": 1, "containerID": "containerd://old"}}


@pytest.mark.parametrize(
    ("status", "previous", "picked"),
    [
        ({"restartCount": 0, "state": RUNNING, "containerID": "containerd://a"}, False,
         (0, "containerd://a")),
        ({"restartCount": 2, "state": RUNNING, "containerID": "containerd://c",
          "lastState": {"terminated": {"containerID": "containerd://b"}}}, True,
         (1, "containerd://b")),
        ({"restartCount": 0, "state": {"terminated": {"containerID": "containerd://a"}}}, False,
         (0, "containerd://a")),
        ({"restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
          "lastState": {"terminated": {"containerID": "containerd://d"}}}, False,
         (3, "containerd://d")),
        ({"restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
          "lastState": {"terminated": {"containerID": "containerd://d"}}}, True,
         (3, "containerd://d")),
    ],
)  # fmt: skip
def test_pick_instance(status: dict[str, Any], previous: bool, picked: tuple[int, str]) -> None:
    assert pick_instance("p", "c", status, previous) == picked


@pytest.mark.parametrize(
    ("status", "previous", "message"),
    [
        (None, False, 'container "c" in pod "p" is not available'),
        ({"state": {"waiting": {"reason": "ContainerCreating"}}}, False,
         'container "c" in pod "p" is waiting to start: ContainerCreating'),
        ({"state": {"waiting": {"reason": "ErrImagePull"}}}, False,
         'container "c" in pod "p" is waiting to start: image can\'t be pulled'),
        ({"state": {"waiting": {"reason": "ImagePullBackOff"}}}, False,
         'container "c" in pod "p" is waiting to start: trying and failing to pull image'),
        ({"state": RUNNING, "containerID": "containerd://a"}, True,
         'previous terminated container "c" in pod "p" not found'),
        ({"state": {}}, False, 'container "c" in pod "p" is waiting to start - no logs yet'),
    ],
)  # fmt: skip
def test_no_logs_in_the_kubelets_words(
    status: dict[str, Any] | None, previous: bool, message: str
) -> None:
    with pytest.raises(NoLogs) as info:
        pick_instance("p", "c", status, previous)
    assert str(info.value) == message


# --- the serving certificate ------------------------------------------------------------------


def test_self_signed_certificate_as_client_go_makes_it(tmp_path: Path) -> None:
    now = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    cert_pem, key_pem = selfsigned.generate("node-a", now)
    cert, ca = x509.load_pem_x509_certificates(cert_pem)
    stamp = int(now.timestamp())
    cn = NameOID.COMMON_NAME
    assert cert.subject.get_attributes_for_oid(cn)[0].value == f"node-a@{stamp}"
    assert ca.subject.get_attributes_for_oid(cn)[0].value == f"node-a-ca@{stamp}"
    assert cert.issuer == ca.subject
    assert cert.not_valid_before_utc == now - dt.timedelta(hours=1)
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == dt.timedelta(days=365)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["node-a"]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert key_pem.startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    ip_cert = x509.load_pem_x509_certificates(selfsigned.generate("10.0.0.7")[0])[0]
    ip_san = ip_cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in ip_san.get_values_for_type(x509.IPAddress)] == ["10.0.0.7"]


def test_self_signed_files_are_written_once(tmp_path: Path) -> None:
    pair = selfsigned.ensure(tmp_path / "pki", "node-a")
    assert stat.S_IMODE(os.stat(pair.key_file).st_mode) == 0o600
    first = pair.cert_file.read_bytes()
    assert selfsigned.ensure(tmp_path / "pki", "node-a").cert_file.read_bytes() == first
    pair.cert_file.write_text("garbage")
    assert selfsigned.ensure(tmp_path / "pki", "node-a").cert_file.read_bytes() != first


def test_every_go_cipher_name_maps_to_an_openssl_name() -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    available = {c["name"] for c in context.get_ciphers()}
    modern = [n for n in tlsnames.GO_CIPHERS if "ECDHE" in n and ("GCM" in n or "CHACHA" in n)]
    assert {tlsnames.GO_CIPHERS[n] for n in modern} <= available
    assert tlsnames.openssl_ciphers(("TLS_AES_128_GCM_SHA256",)) == ""
    context.set_ciphers(tlsnames.openssl_ciphers(tuple(modern)))


# --- what the parent starts the worker with -----------------------------------------------------


def test_http_options_from_the_kubelet_configuration(tmp_path: Path) -> None:
    import argparse

    from pkletd.supervisor import config, workeroptions
    from pkletd.workers.http import Api, AuthorizationMode, Listen

    parser = argparse.ArgumentParser()
    config.add_flags(parser)
    path = tmp_path / "kubelet.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "readOnlyPort: 10255\nport: 11250\nauthentication: {x509: {clientCAFile: /ca.crt}}\n"
        "tlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n"
    )
    args = ["--config", str(path), "--root-dir", "/srv/kubelet", "--hostname-override", "n1"]
    cfg = config.load(parser.parse_args(args)).config
    options = workeroptions.http_options(cfg)
    assert options.listens == (
        Listen("127.0.0.1", 10248, Api.HEALTHZ),
        Listen("0.0.0.0", 10255, Api.READ_ONLY),
        Listen("0.0.0.0", 11250, Api.KUBELET),
    )
    assert options.node_name == "n1"
    assert options.tls.cert_dir == "/srv/kubelet/pki"
    assert options.tls.cipher_suites == ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",)
    assert options.auth.client_ca_file == "/ca.crt"
    assert (options.auth.anonymous, options.auth.webhook_authn) == (False, True)
    assert options.auth.mode is AuthorizationMode.WEBHOOK
    assert options.configz["port"] == 11250


def test_error_lines_are_throttled() -> None:
    from pkletd.workers.http.authfilter import Throttle

    clock = FakeClock(mono=100.0)
    throttle = Throttle(10.0, clock)
    assert throttle.due()
    assert not throttle.due()
    clock.mono += 9.9
    assert not throttle.due()
    clock.mono += 0.2
    assert throttle.due()
