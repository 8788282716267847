"""A real pkletd's http worker SIGKILLed again and again while clients ask in a tight loop:
no connection is refused (the ports stay bound in the fork server and connections wait in
the backlog), every request is answered but the one a killed worker had in hand, and the
kubelet API's TLS works with every new worker. A port already taken is a clear error."""

from __future__ import annotations

import os
import signal
import socket
import ssl

import pytest

from tests.harness.node import Pkletd, wait_for
from tests.harness.requestloop import Outcome, RequestLoop, healthz, https_healthz

pytestmark = pytest.mark.slow

KILLS = 3


def open_kubelet_api(pkletd: Pkletd) -> None:
    """Anonymous requests allowed: /healthz on the kubelet API's port answers ``ok``."""
    pkletd.write_config(
        authentication={"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        authorization={"mode": "AlwaysAllow"},
    )


def no_verify() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def kill_http(pkletd: Pkletd, loops: list[RequestLoop]) -> None:
    """SIGKILL the http worker; wait until it is back and each loop got an answer from it."""
    old = pkletd.workers()["http"]["pid"]
    os.kill(old, signal.SIGKILL)

    def back() -> bool:
        worker = pkletd.workers()["http"]
        return worker["state"] == "running" and worker["pid"] not in (0, old)

    wait_for("http back with a new pid", back, timeout=30)
    for loop in loops:
        seen = len(loop.attempts)
        wait_for(
            "an answer from the new worker",
            lambda loop=loop, seen=seen: any(
                a.outcome is Outcome.ANSWERED for a in loop.attempts[seen:]
            ),
            timeout=30,
        )


def test_requests_across_sigkills_of_the_http_worker_are_never_refused(pkletd: Pkletd) -> None:
    open_kubelet_api(pkletd)
    pkletd.start()
    loops = [
        RequestLoop(healthz(pkletd.healthz_port)).start(),
        RequestLoop(https_healthz(pkletd.port, no_verify())).start(),
    ]
    try:
        for _ in range(KILLS):
            kill_http(pkletd, loops)
    finally:
        attempts = [loop.stop() for loop in loops]
    assert pkletd.workers()["http"]["restarts"] == KILLS
    for made in attempts:
        outcomes = [a.outcome for a in made]
        assert outcomes.count(Outcome.REFUSED) == 0
        assert [a.error for a in made if a.outcome is Outcome.FAILED] == []
        # at most the request each killed worker had accepted: a SIGKILL ends it
        assert outcomes.count(Outcome.CUT) <= KILLS
        assert outcomes.count(Outcome.ANSWERED) > KILLS
    log = pkletd.log("http")
    assert "serving api=kubelet" in log and "tls=True inherited=True" in log


def test_a_port_already_taken_is_a_clear_error_and_is_served_once_free(pkletd: Pkletd) -> None:
    taken = socket.create_server(("127.0.0.1", pkletd.healthz_port))
    with taken:
        pkletd.start()
        address = f"address=127.0.0.1:{pkletd.healthz_port}"
        assert (
            f"cannot listen api=healthz {address} error=[Errno 98] Address already in use; "
            "the http worker retries"
        ) in pkletd.log()
        wait_for(
            "the worker's own error",
            lambda: f"cannot listen api=healthz {address}" in pkletd.log("http"),
        )
        served = RequestLoop(healthz(pkletd.read_only_port))
        served.start()
        wait_for("the read-only port answers", lambda: served.count(Outcome.ANSWERED) > 0)
        served.stop()
    loop = RequestLoop(healthz(pkletd.healthz_port)).start()
    try:
        wait_for("healthz served once free", lambda: loop.count(Outcome.ANSWERED) > 0, timeout=30)
    finally:
        loop.stop()
