"""A local, honest Kubernetes API server for tests (HTTPS on 127.0.0.1, standard library).

It answers the official Python client and the real kubectl the way kube-apiserver 1.32 does:
the same JSON shapes, status codes and Status objects, resourceVersions from one revision
counter, watches with bookmarks and 410 after compaction, graceful pod deletion, status
subresources, strategic merge patch, admission (ServiceAccount, NodeRestriction...),
TokenRequest/TokenReview/SubjectAccessReview, server-side tables, and proxying of logs,
exec and ``nodes/<n>/proxy`` to a node's kubelet. Use it in a test::

    from tests.harness.apiserver import ApiServer, ApiServerConfig

    server = ApiServer(tmp_path, ApiServerConfig(bookmark_interval=1.0, scheduler=True))
    server.start()
    kubeconfig = server.kubeconfig()                       # admin (system:masters)
    node = server.kubeconfig(user="system:node:n1", groups=["system:nodes"])
    ...
    server.stop()

or the ``apiserver`` fixture of ``tests/harness/conftest.py``; standalone:
``python -m tests.harness.apiserver --dir D [--port P]``.

Modules: ``server`` (lifecycle, TLS), ``handler``/``routes``/``requestinfo``/``encoding``
(HTTP, routing, content types), ``rest``/``deletion``/``lists``/``calls`` (the registry verbs),
``store``/``watch`` (revisions, history, watch streams), ``resources`` (the served table),
``kinds/*`` (per-kind strategies, pod defaults and validation), ``schema``/``quantities``
(decoding with the client's models), ``protobuf`` (kubectl's protobuf bodies), ``patch``/
``strategic`` (patch formats), ``admission``/``noderestriction``, ``auth``/``tokens``/
``reviews``, ``tables``/``printers``, ``discovery``/``openapi``, ``proxy``, ``metrics``,
``controllers``, ``scheduler``, ``certs``, ``errors``/``validation`` (Status texts), and
``client`` (what tests use: the official client and kubectl for a server).
"""

from tests.harness.apiserver.auth import Attributes, Decision, UserInfo
from tests.harness.apiserver.errors import ApiError
from tests.harness.apiserver.metrics import RequestRecord
from tests.harness.apiserver.server import ApiServer, ApiServerConfig

__all__ = [
    "ApiError",
    "ApiServer",
    "ApiServerConfig",
    "Attributes",
    "Decision",
    "RequestRecord",
    "UserInfo",
]
