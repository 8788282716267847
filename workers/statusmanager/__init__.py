"""pkletd: status-manager -- what the node tells the API server about its pods.

The kubelet's status manager (``pkg/kubelet/status``), its mirror pod client
(``pkg/kubelet/pod/mirror_client.go``) and client-go's event recorder, as one worker:

- **pod status**: each pod's status as the parent computes it (``Snapshot.pods``, then
  ``PodStatusUpdated``) is PATCHed to ``pods/<name>/status`` (strategic merge, the UID
  as precondition: a pod recreated under the name is left alone) when it says more
  than the API pod has of ours (``podstatus.py``). A failed write is retried after 1 s
  doubling to 30 s, and at once when the server answers again. What the API holds
  comes from the api-watcher's watch (``ApiPodsObserved``, handed on by the parent, the
  whole set in each snapshot): a status someone else changed is written back when the
  watch shows it, with no list of its own; a (re)started worker writes nothing before
  the whole set and then only what differs.
- **final delete**: a terminated API pod (``PodTerminated``, ``Snapshot.terminated``)
  is deleted with grace 0 and its UID as the precondition, after its last status;
  gone (404) or replaced (409) counts as done; the parent hears ``PodDeleted``.
- **mirror pods** (``mirrors.py``) of static pods: created with the Node as owner,
  replaced when the static pod changes, recreated when someone deletes one (seen by
  the watch), deleted when the parent forgets the static pod; they carry its status.
- **events** (``events.py``): ``EventRecorded`` posted as core/v1 Events, correlated
  (counts, aggregation, spam filter) as client-go does, queued while the server is
  down, at ``eventRecordQPS``/``eventBurst`` on a client of their own.

Calls run on job threads (``jobs.py``), so heartbeats go on while the server is slow
or gone; one line is logged per kind of failure, and one when the server is back
(``retry.py``). Nothing else is reported to the parent.
"""

from pkletd.workers.statusmanager.context import Options
from pkletd.workers.statusmanager.worker import StatusManager, main

__all__ = ["Options", "StatusManager", "main"]
