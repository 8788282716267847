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

or the ``apiserver`` fixture of ``tests/conftest.py``; standalone:
``python -m tests.harness.apiserver --dir D [--port P]``.

What a kubelet reads for its pods is held to a real cluster's rules, so a node agent that
passes here does not fail there:

* Authorization is ``--authorization-mode=Node,RBAC`` (``nodeauthz``, ``nodegraph``): a
  ``system:node:<n>`` user in ``system:nodes`` may ``get``/``list``/``watch`` a Secret or
  ConfigMap (``get`` a PVC) only if a pod bound to ``n`` references it (volumes, projected
  sources, env, envFrom, imagePullSecrets; not through a mirror pod), one object at a time
  (a list or watch names it with ``fieldSelector=metadata.name=<name>``); may create a token
  only for the service account of such a pod and read no service account; reads only its own
  Node, reads pods bound to it and lists/watches pods only with ``spec.nodeName=<n>``
  (``AuthorizeNodeWithSelectors``, on in 1.32); otherwise has the ``system:node`` rules
  (services, ``get`` endpoints, core events, its Lease, pod status, mirror pods, evictions,
  TokenReview/SubjectAccessReview) and the discovery every user has. The graph is read from
  the stored pods at each request, so a deletion or a binding counts at once. Denials are
  the real 403s (``secrets "x" is forbidden: User "system:node:n1" cannot get resource
  "secrets" in API group "" in the namespace "ns": no relationship found between node 'n1'
  and this object``). Other users are allowed everything; ``node_authorization=False`` lets
  nodes do anything too, and ``server.authorizer`` may be replaced outright.
* ConfigMaps and Secrets (``kinds/core``): config keys, at most 1 MiB of data, ``immutable``
  objects whose data cannot change, Secret ``stringData`` merged into ``data``, the
  docker-config types' JSON (``kinds/gojson``), each refusal a 422 with the real field error.
* TokenRequest (``reviews``, ``tokens``): audiences default to the server's, 600 s to 2^32 s,
  ``max_token_expiration`` shortens longer requests with the real warning, pod-bound 3607 s
  tokens extended to a year; a bound pod must exist with that uid and run as that service
  account. A TokenReview accepts a token only for its audiences, before its expiry, while
  its service account and bound pod exist (and the pod was not marked for deletion over
  60 s ago).
* ServiceAccount admission copies the service account's ``imagePullSecrets`` into a pod
  that names none.
* RuntimeClasses (``node.k8s.io/v1``, ``kinds/runtimeclasses``), which a node may list and
  watch; the RuntimeClass admission refuses a pod whose class does not exist
  (``pod rejected: RuntimeClass "x" not found``) and copies the class's overhead into the
  pod's ``spec.overhead``.
* Storage (``kinds/volumes``, ``kinds/storage``, ``storagecontrollers``): PersistentVolumes,
  claims, StorageClass, CSIDriver, CSINode, VolumeAttachment with the real defaults and
  validation; a node gets the claims its pods use (an ephemeral volume's ``<pod>-<volume>``
  too), the volumes bound to them, their CSI secrets for the node and the attachments to
  it, reads every CSIDriver, writes only its own CSINode. The ephemeral volume and
  attach/detach controllers run on writes; binding (``Kube.bind``) and the attacher's
  ``status.attached`` (``Kube.set_attached``) are the test's.

Modules: ``server`` (lifecycle, TLS), ``handler``/``routes``/``requestinfo``/``encoding``
(HTTP, routing, content types), ``rest``/``deletion``/``lists``/``calls`` (the registry verbs),
``store``/``watch`` (revisions, history, watch streams), ``resources`` (the served table),
``kinds/*`` (per-kind strategies, pod defaults and validation), ``schema``/``quantities``
(decoding with the client's models), ``protobuf`` (kubectl's protobuf bodies), ``patch``/
``strategic`` (patch formats), ``admission``/``noderestriction``, ``auth``/``nodeauthz``/
``nodegraph``/``tokens``/``reviews``, ``tables``/``printers``/``storageprinters``,
``discovery``/``openapi``, ``proxy``, ``metrics``, ``controllers``/``storagecontrollers``,
``pvbinding``, ``scheduler``, ``certs``, ``errors``/``validation`` (Status texts), and
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
