"""A Prometheus server that scrapes a kubelet API, and promtool's metrics check.

Debian's ``prometheus`` (2.42, with ``promtool``). ``Prometheus(dir, target, token)``
scrapes ``https://<target>`` every second with a bearer token (the server's certificate
is not checked: a node's is self-signed), one job per path of ``PATHS``; its config,
TSDB and log live in ``dir``. ``query`` asks its HTTP API for an instant vector.
``scrape`` reads one path as such a job does; ``promtool_problems`` is what ``promtool
check metrics`` says of an exposition text ("" when it passes).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.harness.containerd import PROMETHEUS_BIN, PROMTOOL_BIN, HarnessError, tail, wait_for

# job name -> path, the kubelet's own scrape paths
PATHS = {
    "kubelet": "/metrics",
    "cadvisor": "/metrics/cadvisor",
    "resource": "/metrics/resource",
    "probes": "/metrics/probes",
}
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def scrape_config(target: str, token: str) -> dict[str, Any]:
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [
            {
                "job_name": job,
                "metrics_path": path,
                "scheme": "https",
                "authorization": {"credentials": token},
                "tls_config": {"insecure_skip_verify": True},
                "static_configs": [{"targets": [target]}],
            }
            for job, path in PATHS.items()
        ],
    }


class Prometheus:
    def __init__(self, base: Path, port: int, target: str, token: str) -> None:
        self.base = base
        self.url = f"http://127.0.0.1:{port}"
        self._target = target
        self._token = token
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.base / "prometheus.log"

    def start(self) -> Prometheus:
        self.base.mkdir(parents=True, exist_ok=True)
        config = self.base / "prometheus.yml"
        config.write_text(json.dumps(scrape_config(self._target, self._token)))  # JSON is YAML
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [
                    str(PROMETHEUS_BIN),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.base / 'tsdb'}",
                    f"--web.listen-address={self.url.removeprefix('http://')}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_for(self._ready, START_TIMEOUT, "prometheus ready", lambda: tail(self.log_path))
        return self

    def _ready(self) -> bool:
        if self._proc is not None and self._proc.poll() is not None:
            raise HarnessError(f"prometheus exited {self._proc.returncode}:\n{tail(self.log_path)}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def query(self, expression: str) -> list[dict[str, Any]]:
        """The instant vector ``expression`` gives now: ``[{"metric": {...}, "value": [t, v]}]``."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
        with urllib.request.urlopen(url, timeout=10) as reply:
            answer = json.load(reply)
        if answer.get("status") != "success":
            raise HarnessError(f"query {expression!r} failed: {answer}")
        return list(answer["data"]["result"])

    def stop(self) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None


def scrape(target: str, path: str, token: str) -> str:
    """``https://<target><path>`` as a job of ``Prometheus`` reads it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(
        f"https://{target}{path}", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10, context=context) as reply:
        return str(reply.read().decode())


def promtool_problems(text: str) -> str:
    """What ``promtool check metrics`` finds wrong with ``text``; "" if nothing."""
    checked = subprocess.run(
        [str(PROMTOOL_BIN), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return "" if checked.returncode == 0 else checked.stdout + checked.stderr
