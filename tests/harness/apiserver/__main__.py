"""Run the test API server in the foreground for manual use.

    .venv/bin/python -m tests.harness.apiserver --dir /tmp/apiserver [--port 6443] [--scheduler]

writes ``<dir>/admin.kubeconfig`` (``kubectl --kubeconfig <dir>/admin.kubeconfig get ns``),
prints the URL and serves until interrupted (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from tests.harness.apiserver.server import ApiServer, ApiServerConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.apiserver")
    parser.add_argument("--dir", required=True, type=Path, help="where PKI and kubeconfigs go")
    parser.add_argument("--port", type=int, default=0, help="listen port (default: any free)")
    parser.add_argument("--scheduler", action="store_true", help="bind pending pods to nodes")
    parser.add_argument("--bookmark-interval", type=float, default=60.0)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s apiserver[%(process)d] %(name)s: %(message)s",
    )
    config = ApiServerConfig(
        port=args.port, scheduler=args.scheduler, bookmark_interval=args.bookmark_interval
    )
    server = ApiServer(args.dir, config)
    server.start()
    kubeconfig = server.kubeconfig(args.dir / "admin.kubeconfig")
    print(f"serving on {server.url}; kubeconfig {kubeconfig}", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
