"""pkletd: http -- the kubelet's HTTP endpoints, on three kinds of listener.

- healthz (``healthzBindAddress:healthzPort``, default 127.0.0.1:10248, plain HTTP):
  ``/healthz``.
- read-only (``readOnlyPort``, off when 0, plain HTTP, no authentication): ``/healthz``,
  ``/pods``, ``/metrics/probes``.
- the kubelet API (``address:port``, default 0.0.0.0:10250, HTTPS): every request
  authenticated (client certificates, bearer tokens through TokenReviews, anonymous if
  allowed) and authorized (AlwaysAllow, or SubjectAccessReviews on ``nodes/<node>``);
  the above plus ``/runningpods/``, ``/configz``, ``/spec/``,
  ``/containerLogs/{namespace}/{pod}/{container}``, ``/logs/``, and the streaming
  ``/exec``, ``/attach``, ``/portForward`` and ``/run``.

Modules: ``worker`` (the process), ``server`` (aiohttp on one loop in a thread, with the
connection bounds), ``listening`` (the listening sockets the parent binds once and each
incarnation inherits), ``routes`` (the tables), ``endpoints``, ``containerlogs`` and
``crilog`` (container logs), ``nodelogs``, ``machine``, ``probemetrics``; ``authn``,
``authz``, ``authfilter``, ``reviews``, ``offload``, ``ttlcache`` (who may ask what);
``tlscontext`` and ``selfsigned`` (serving TLS); ``streaming``, ``streamoptions``,
``streamproxy`` and ``upgrade`` (exec, attach, port-forward and run: the request, the
proxy to the runtime's streaming server, taking the connection over); ``view`` (the
node's state the handlers read); ``options``.
"""

from pkletd.workers.http.options import (
    Api,
    ApiClientOptions,
    AuthOptions,
    AuthorizationMode,
    HttpOptions,
    Listen,
    TlsOptions,
)
from pkletd.workers.http.probemetrics import metrics_text
from pkletd.workers.http.worker import HttpWorker, main

__all__ = [
    "Api",
    "ApiClientOptions",
    "AuthOptions",
    "AuthorizationMode",
    "HttpOptions",
    "HttpWorker",
    "Listen",
    "TlsOptions",
    "main",
    "metrics_text",
]
