"""The ``pkletd`` command: start | status | restart-worker | stop, and ``--version``.

Started as ``kubelet`` (a link of that name), it is ``kubeletcmd``: the kubelet's
command line, no subcommand.

Only ``start`` imports the heavy parts (zmq, gRPC); the other commands talk to
the control socket with ``_socket`` alone, so they answer in tens of milliseconds.
A plain ``pkletd status [--run-dir DIR]`` imports no more than this module and
builtins: its arguments are read without ``argparse`` and its answer comes as
``marshal`` (the control socket's reply for the same Python), so not even ``re`` is
imported (``json``, ``argparse`` and ``pathlib`` each pull it in: alone it costs half
of ``python -c pass``); nor ``typing`` (annotations only) nor ``socket`` (its enums
and ``selectors`` cost more than the request). Every other use goes through
``argparse`` and JSON; the worker names are imported only for ``restart-worker``, the
package's metadata only for ``--version``.
Exit codes: 0 ok, 1 failure (e.g. pkletd not running), 2 bad use (bad flags, bad
config, unknown worker name).
"""

from __future__ import annotations

import _socket
import marshal
import sys
import time

TYPE_CHECKING = False  # mypy takes it as true; typing costs `pkletd status` ~3 ms to import
if TYPE_CHECKING:
    import argparse
    from typing import Any

DEFAULT_RUN_DIR = "/run/pkletd"
CONTROL_SOCKET = "control.sock"
TIMEOUT_S = 10.0
STATUS_REQUEST = b'{"command": "status", "reply": "marshal"}\n'


def _parser(starting: bool, restarting: bool = False) -> argparse.ArgumentParser:
    import argparse

    class Version(argparse.Action):
        """``--version``: ``pkletd <version>`` of the installed package, then exit."""

        def __init__(self, option_strings: list[str], dest: str, **_: Any) -> None:
            super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

        def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
            from importlib.metadata import version

            print(f"pkletd {version('pkletd')}")
            parser.exit()

    parser = argparse.ArgumentParser(prog="pkletd", description="A Kubernetes node agent.")
    parser.add_argument("--version", action=Version)
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="run the node agent in the foreground")
    if starting:  # the flags need the config module; other commands stay light
        from pkletd.supervisor import config

        config.add_flags(start)
    status = commands.add_parser("status", help="show workers and pods")
    status.add_argument("--run-dir", default=DEFAULT_RUN_DIR)
    status.add_argument("--json", action="store_true", help="print one JSON object")
    restart = commands.add_parser("restart-worker", help="restart one worker process gracefully")
    restart.add_argument("name", help=_worker_names() if restarting else None)
    restart.add_argument("--run-dir", default=DEFAULT_RUN_DIR)
    stop = commands.add_parser("stop", help="stop pkletd and its workers; pods keep running")
    stop.add_argument("--run-dir", default=DEFAULT_RUN_DIR)
    return parser


def _worker_names() -> str:
    from pkletd.ipc.bus.workername import WorkerName

    return f"a worker that runs (see status): one of {', '.join(WorkerName)}"


def request(run_dir: str, body: dict[str, Any]) -> dict[str, Any]:
    """One JSON request, its JSON reply."""
    import json

    reply: dict[str, Any] = json.loads(_exchange(run_dir, (json.dumps(body) + "\n").encode()))
    return reply


def status_reply(run_dir: str) -> dict[str, Any]:
    """The status, as the control socket answers ``STATUS_REQUEST``: in ``marshal``, or
    in JSON from a running pkletd older than this command (upgraded, not restarted)."""
    data = _exchange(run_dir, STATUS_REQUEST)
    if data.startswith(b'{"'):  # no marshal data starts so: a dict's key is no '"' type
        import json

        old: dict[str, Any] = json.loads(data)
        return old
    try:
        reply: dict[str, Any] = marshal.loads(data)
    except (EOFError, TypeError) as exc:
        raise ValueError(f"bad status reply ({len(data)} bytes): {exc}") from exc
    return reply


def _exchange(run_dir: str, request: bytes) -> bytes:
    """Sends ``request``; the reply is all the control socket sends before closing."""
    path = f"{run_dir}/{CONTROL_SOCKET}"
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(TIMEOUT_S)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise ConnectionError(f"pkletd is not running (no control socket at {path})") from exc
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    finally:
        sock.close()
    return b"".join(chunks)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60}m"


def format_status(status: dict[str, Any], now: float | None = None) -> str:
    lines = [
        _node_line(status["node"], time.time() if now is None else now),
        *_pleg_line(status["node"]),
        *_certificate_line(status["node"], time.time() if now is None else now),
        *_shutdown_line(status["node"]),
        "",
    ]
    if status.get("gc"):
        lines += [*_gc_lines(status["gc"], time.time() if now is None else now), ""]
    if status.get("pressure", {}).get("signals"):
        lines += _pressure_lines(status["pressure"]) + [""]
    rows: list[tuple[str, ...]] = [("WORKER", "PID", "STATE", "RESTARTS", "UPTIME", "LAST EXIT")]
    for w in status["workers"]:
        uptime = _duration(w["uptime_s"]) if w["uptime_s"] else "-"
        rows.append(
            (
                w["name"],
                str(w["pid"] or "-"),
                w["state"],
                str(w["restarts"]),
                uptime,
                w["last_exit"] or "-",
            )
        )
    lines += _table(rows)
    lines.append("")
    rows = [("POD", "PHASE", "CONTAINERS")]
    for p in status["pods"]:
        containers = ", ".join(_container_cell(c) for c in p["containers"])
        rows.append((f"{p['namespace']}/{p['name']}", p["phase"], containers or "-"))
    lines += _table(rows)
    lines += _manifest_lines(status.get("manifests") or [])
    lines += _csi_driver_lines(status.get("csi_drivers") or [])
    return "\n".join(lines)


def _csi_driver_lines(drivers: list[dict[str, Any]]) -> list[str]:
    """The CSI drivers registered on the node (plugin-watcher): nothing when none is."""
    if not drivers:
        return []
    rows: list[tuple[str, ...]] = [("CSI DRIVER", "NODE ID", "MAX VOLUMES", "ENDPOINT", "TOPOLOGY")]
    for d in drivers:
        topology = ", ".join(f"{k}={v}" for k, v in sorted(d["topology"].items()))
        rows.append(
            (d["name"], d["node_id"], str(d["max_volumes"] or "-"), d["endpoint"], topology or "-")
        )
    return ["", *_table(rows)]


def _manifest_lines(rejected: list[dict[str, Any]]) -> list[str]:
    """The manifests the static pod sources reject now: no pod of theirs runs."""
    if not rejected:
        return []
    rows: list[tuple[str, ...]] = [("MANIFEST REJECTED", "REASON")]
    rows += [(m["path"], m["reason"]) for m in rejected]
    return ["", *_table(rows)]


def _certificate_line(node: dict[str, Any], now: float) -> list[str]:
    """``client certificate: expires in 41s`` or ``client certificate: none yet, error:
    ...`` (TLS bootstrap or rotation going wrong); nothing without a cert-manager report."""
    found = node.get("client_certificate")
    if not found or not (found["path"] or found["error"]):
        return []
    if found["not_after"]:
        left = found["not_after"] - now
        facts = [f"expires in {_duration(left)}" if left > 0 else "EXPIRED"]
    else:
        facts = ["in use" if found["path"] else "none yet"]
    if found["error"]:
        facts.append(f"error: {found['error']}")
    return [f"client certificate: {', '.join(facts)}"]


def _pleg_line(node: dict[str, Any]) -> list[str]:
    """``pleg: evented, relisted 2m3s ago`` or ``pleg: relisting (why), relisted 0s ago``,
    and ``NOT HEALTHY`` past the kubelet's threshold."""
    pleg = node.get("pleg")
    if pleg is None:
        return []
    mode = pleg["mode"] + (f" ({pleg['reason']})" if pleg["reason"] else "")
    line = f"pleg: {mode}, relisted {_duration(pleg['relisted_s_ago'])} ago"
    return [line if pleg["healthy"] else line + ", NOT HEALTHY"]


def _shutdown_line(node: dict[str, Any]) -> list[str]:
    """``shutdown: idle, delay lock held (logind allows 30s of the 30s grace period)``,
    with the worker's error; nothing when graceful node shutdown is off."""
    shutdown = node.get("shutdown")
    if shutdown is None:
        return []
    lock = "delay lock held" if shutdown["inhibitor_held"] else "no delay lock"
    allows = f"logind allows {shutdown['inhibit_delay_max_s']:g}s"
    line = f"shutdown: {shutdown['stage']}, {lock} ({allows} of the "
    line += f"{shutdown['grace_period_s']}s grace period)"
    return [line + (f", error: {shutdown['error']}" if shutdown["error"] else "")]


def _node_line(node: dict[str, Any], now: float) -> str:
    """``node <name>: <standalone | registered, Ready, lease renewed 3s ago, API ok>``."""
    if not node["joined"]:
        return f"node {node['name']}: standalone (static pods only)"
    facts = ["registered" if node["registered"] else "not registered"]
    ready = node["conditions"].get("Ready")
    if ready is not None:
        facts.append("Ready" if ready == "True" else "NotReady")
    renewed = node["lease_renewed_at"]
    facts.append(f"lease renewed {_duration(now - renewed)} ago" if renewed else "no lease yet")
    facts.append(f"API error: {node['api_error']}" if node["api_error"] else "API ok")
    return f"node {node['name']}: {', '.join(facts)}"


COUNTED_SIGNALS = ("nodefs.inodesFree", "imagefs.inodesFree", "pid.available")
_UNITS = ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki"))


def _pressure_lines(pressure: dict[str, Any]) -> list[str]:
    """The eviction signals against their thresholds, then the pressure conditions."""
    rows: list[tuple[str, ...]] = [("SIGNAL", "AVAILABLE", "CAPACITY", "THRESHOLDS")]
    for reading in pressure["signals"]:
        counted = reading["signal"] in COUNTED_SIGNALS
        thresholds = ", ".join(_threshold_cell(t, counted) for t in reading["thresholds"])
        rows.append(
            (
                reading["signal"],
                _amount(reading["available"], counted),
                _amount(reading["capacity"], counted),
                thresholds or "-",
            )
        )
    conditions = ", ".join(pressure["conditions"]) or "none"
    return [*_table(rows), f"pressure: {conditions}"]


def _threshold_cell(threshold: dict[str, Any], counted: bool) -> str:
    """``hard <100Mi``, ``soft <10% (2.5Gi) for 1m30s``, with ``MET`` when it is."""
    value = threshold["value"]
    if value.endswith("%"):
        value += f" ({_amount(threshold['quantity'], counted)})"
    grace = threshold["grace_s"]
    cell = f"soft <{value} for {_duration(grace)}" if grace else f"hard <{value}"
    return cell + " MET" if threshold["met"] else cell


def _amount(value: int, counted: bool) -> str:
    return str(value) if counted else _size(value)


def _gc_lines(gc: dict[str, Any], now: float) -> list[str]:
    """The image filesystem against the image GC thresholds, then the last collections."""
    fs = gc["image_fs"]
    head = "image fs: not read yet"
    if fs is not None:
        head = (
            f"image fs: {fs['usage_percent']}% used of {_size(fs['capacity_bytes'])} "
            f"(image GC at {fs['high_threshold_percent']}%, "
            f"down to {fs['low_threshold_percent']}%)"
        )
    return [
        head,
        _gc_line("image GC", gc["image_gc"], now),
        _gc_line("container GC", gc["container_gc"], now),
    ]


def _gc_line(what: str, last: dict[str, Any] | None, now: float) -> str:
    """``image GC 2m3s ago: 3 images removed, 1.2Mi freed; error: ...``."""
    if last is None:
        return f"{what}: not run yet"
    if "images" in last:
        removed = f"{last['images']} images removed, {_size(last['freed_bytes'])} freed"
    else:
        removed = (
            f"{last['containers']} containers, {last['sandboxes']} sandboxes, "
            f"{last['log_dirs']} log dirs removed"
        )
    line = f"{what} {_duration(now - last['at'])} ago: {removed}"
    return f"{line}; error: {last['error']}" if last["error"] else line


def _size(count: int) -> str:
    for size, unit in _UNITS:
        if count >= size:
            return f"{count / size:.1f}{unit}"
    return f"{count}B"


def _container_cell(container: dict[str, Any]) -> str:
    """``name=state``, then what an operator should notice: not ready, restarts; an
    ephemeral (debug) container says so, and is never ready."""
    notes = ["ephemeral"] if container.get("ephemeral") else []
    if container["state"] == "running" and not container.get("ready", True) and not notes:
        notes.append("not ready")
    if container["restart_count"]:
        notes.append(f"restarts {container['restart_count']}")
    cell = f"{container['name']}={container['state']}"
    return f"{cell} ({', '.join(notes)})" if notes else cell


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def start(args: argparse.Namespace) -> int:
    """Load the configuration (exit 2 when bad) and run the node agent."""
    import gc

    gc.disable()  # while importing: the fork server freezes and shares what this makes
    from pkletd.supervisor import config

    try:
        loaded = config.load(args)
    except config.ConfigError as exc:
        print(f"pkletd: {exc}", file=sys.stderr)
        return 2
    from pkletd.supervisor import main as supervisor_main
    from pkletd.supervisor.credentialproviders.providerconfig import RegistrationFailed

    try:
        return supervisor_main.start(loaded.config, loaded.warnings)
    except supervisor_main.AlreadyRunning as exc:
        print(f"pkletd: {exc}", file=sys.stderr)
        return 1
    except RegistrationFailed as exc:  # the kubelet exits 1 too
        print(f"pkletd: failed to register CRI auth plugins: {exc}", file=sys.stderr)
        return 1


def _plain_status(run_dir: str) -> int:
    """``pkletd status [--run-dir DIR]``: the table, asked and printed with builtins only."""
    try:
        reply = status_reply(run_dir)
    except (ConnectionError, OSError, ValueError) as exc:
        print(f"pkletd: {exc}", file=sys.stderr)
        return 1
    if not reply.get("ok"):
        print(f"pkletd: status: {reply.get('error')}", file=sys.stderr)
        return 1
    print(format_status(reply))
    return 0


def _plain_status_run_dir(argv: list[str]) -> str | None:
    """The run dir of a plain ``status``, ``status --run-dir DIR`` or ``status
    --run-dir=DIR``; None for anything else (argparse reads it, and says what is wrong)."""
    if argv == ["status"]:
        return DEFAULT_RUN_DIR
    if len(argv) == 3 and argv[:2] == ["status", "--run-dir"] and argv[2][:1] not in ("", "-"):
        return argv[2]
    if len(argv) == 2 and argv[0] == "status" and argv[1].startswith("--run-dir="):
        return argv[1].removeprefix("--run-dir=") or None
    return None


def _control(args: argparse.Namespace) -> int:
    import json

    body: dict[str, Any] = {"command": args.command}
    if args.command == "restart-worker":
        body["name"] = args.name
    if args.command == "status" and args.json:
        body["events"] = True  # the plain listing shows none: don't ship them
    try:
        reply = request(args.run_dir, body)
    except (ConnectionError, OSError, ValueError) as exc:
        print(f"pkletd: {exc}", file=sys.stderr)
        return 1
    if not reply.get("ok"):
        names = reply.get("names")
        hint = f"; workers are: {', '.join(names)}" if names else ""
        print(f"pkletd: {args.command}: {reply.get('error')}{hint}", file=sys.stderr)
        return 2 if names else 1
    if args.command == "status":
        print(json.dumps(reply) if args.json else format_status(reply))
    elif args.command == "stop":
        _wait_gone(args.run_dir)
    return 0


def _wait_gone(run_dir: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            status_reply(run_dir)
        except (ConnectionError, OSError, ValueError):
            return
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[0].rpartition("/")[2] == "kubelet":  # a link named kubelet
        from pkletd.supervisor import kubeletcmd

        return kubeletcmd.main()
    argv = sys.argv[1:] if argv is None else argv
    run_dir = _plain_status_run_dir(argv)
    if run_dir is not None:
        return _plain_status(run_dir)
    args = _parser("start" in argv, "restart-worker" in argv).parse_args(argv)
    if args.command == "start":
        return start(args)
    return _control(args)


if __name__ == "__main__":
    sys.exit(main())
