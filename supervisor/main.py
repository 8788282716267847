"""``pkletd start``: prepare the directories, fork the fork server, run the loop.

The fork server is forked once what the workers run is imported (``workerset`` imports
every worker) and before the parent imports its own machinery (the agent and its parts,
the pod logic): the pages of those modules that the parent writes would otherwise stay,
as originals no process uses, in the fork server and every worker (docs/performance.md,
Memory).
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

import setproctitle
from pkletd.ipc.runtime.cri import CriRuntime
from pkletd.supervisor import logs, workerset
from pkletd.supervisor.config import KubeletConfig
from pkletd.supervisor.credentialproviders import providerconfig
from pkletd.supervisor.forkserver import ForkServer

log = logging.getLogger(__name__)

LOCK_FILE = "pkletd.lock"


class AlreadyRunning(RuntimeError):
    pass


def _prepare(config: KubeletConfig) -> int:
    """Create the dirs and take the run-dir lock; returns the lock's fd (held for life)."""
    run_dir = Path(config.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(run_dir, 0o700)
    for path in (config.log_dir, config.root_dir, config.pod_logs_dir):
        Path(path).mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        raise AlreadyRunning(f"another pkletd holds {run_dir / LOCK_FILE}") from exc
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def start(config: KubeletConfig, warnings: tuple[str, ...]) -> int:
    """Run the node; ``RegistrationFailed`` or ``AlreadyRunning`` before anything starts."""
    plugins = providerconfig.register(
        config.image_credential_provider_config, config.image_credential_provider_bin_dir
    )
    _prepare(config)
    setproctitle.setproctitle("pkletd: supervisor")
    logs.configure("supervisor", Path(config.log_dir), to_stderr=True)
    for warning in warnings:
        log.warning("config: %s", warning)
    sockets = workerset.bound_sockets(config)  # once: every http worker inherits them
    entries = workerset.entries(config, sockets)
    forkserver = ForkServer(entries, Path(config.log_dir), sockets)
    forkserver.start()  # before any zmq context, gRPC channel or thread exists
    from pkletd.supervisor import parts  # the parent's own: imported after the fork
    from pkletd.supervisor.agent import Agent
    from pkletd.supervisor.credentialproviders.providers import CredentialProviders
    from pkletd.supervisor.metrics.runtimeops import RuntimeOperations

    operations = RuntimeOperations()  # counts every CRI call of the parent's runtime
    runtime = CriRuntime(
        config.container_runtime_endpoint, config.runtime_request_timeout, operations.observe
    )
    for plugin in plugins:
        log.info("credential provider registered provider=%s", plugin.name)
    credentials = CredentialProviders.of(plugins)
    agent = Agent(parts.build(config, forkserver, list(entries), runtime, operations, credentials))
    try:
        return agent.run()
    except BaseException:  # the top of the parent: stop the workers, exit non-zero for systemd
        log.exception("supervisor loop died; stopping workers (pods keep running)")
        agent.emergency_stop()
        return 1
