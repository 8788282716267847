"""The kubelet's flags pkletd accepts without acting on them, so a kubelet command line works.

The kubelet (1.32-1.34, Linux) has flags for things pkletd does not do (cgroup drivers,
CPU and memory managers, cloud providers, klog's verbosity...). pkletd accepts each of
them and its value, and says so once per flag given: ``NOT_IMPLEMENTED`` flags with a
warning that names them (the value is ignored), ``DEPRECATED`` flags, which do nothing
in the kubelet either (or no longer exist there), with one deprecation line each.
The flags pkletd implements are in ``config``'s field table.

Each entry says whether the flag is a boolean (``--x``, ``--x=false``) or takes a
value (``--x=v``, ``--x v``), and whether it may be given several times.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    BOOL = "bool"  # --x means --x=true
    VALUE = "value"
    REPEATED = "repeated"  # a value, several times (map or list flags)


@dataclass(frozen=True, slots=True)
class KubeletFlag:
    name: str  # without the leading dashes
    kind: Kind
    deprecated: str = ""  # the deprecation note; empty: accepted but not implemented

    @property
    def dest(self) -> str:
        return "kubelet_" + self.name.replace("-", "_")


def _flags(kind: Kind, names: str, deprecated: str = "") -> tuple[KubeletFlag, ...]:
    return tuple(KubeletFlag(name, kind, deprecated) for name in names.split())


_NO_EFFECT = "it has no effect in pkletd"
_REMOVED = "the kubelet no longer has it (dockershim, in-tree cloud and klog flags)"

NOT_IMPLEMENTED: tuple[KubeletFlag, ...] = (
    *_flags(
        Kind.BOOL,
        """enable-server fail-swap-on cgroups-per-qos runonce cpu-cfs-quota
        enable-controller-attach-detach make-iptables-util-chains kernel-memcg-notification
        serialize-image-pulls enable-debugging-handlers contention-profiling
        protect-kernel-defaults exit-on-lock-contention log-json-split-stream
        log-text-split-stream""",
    ),
    *_flags(
        Kind.VALUE,
        """image-service-endpoint cgroup-driver cgroup-root cpu-manager-policy
        cpu-manager-reconcile-period topology-manager-policy topology-manager-scope
        hairpin-mode pod-cidr cpu-cfs-quota-period max-open-files
        kube-api-content-type registry-qps registry-burst oom-score-adj
        volume-plugin-dir kubelet-cgroups
        system-cgroups runtime-cgroups provider-id pods-per-core reserved-cpus
        enforce-node-allocatable system-reserved-cgroup kube-reserved-cgroup
        memory-manager-policy cloud-provider lock-file v vmodule log-flush-frequency
        logging-format log-json-info-buffer-size log-text-info-buffer-size""",
    ),
    *_flags(
        Kind.REPEATED,
        """cpu-manager-policy-options qos-reserved topology-manager-policy-options
        reserved-memory""",
    ),
)

DEPRECATED: tuple[KubeletFlag, ...] = (
    *_flags(Kind.VALUE, "pod-infra-container-image", "the runtime chooses the sandbox image"),
    *_flags(Kind.VALUE, "iptables-masquerade-bit iptables-drop-bit", _NO_EFFECT),
    *_flags(
        Kind.BOOL,
        """register-schedulable keep-terminated-pod-volumes
        experimental-allocatable-ignore-eviction""",
        _NO_EFFECT,
    ),
    *_flags(Kind.VALUE, "experimental-mounter-path cloud-config", _NO_EFFECT),
    *_flags(
        Kind.VALUE,
        """container-runtime network-plugin network-plugin-dir network-plugin-mtu
        cni-conf-dir cni-bin-dir cni-cache-dir docker-endpoint image-pull-progress-deadline
        experimental-dockershim-root-directory azure-container-registry-config
        seccomp-profile-root non-masquerade-cidr log-file log-file-max-size
        stderrthreshold""",
        _REMOVED,
    ),
    *_flags(
        Kind.BOOL,
        """logtostderr alsologtostderr add-dir-header one-output skip-headers
        skip-log-headers experimental-check-node-capabilities-before-mount""",
        _REMOVED,
    ),
)

ALL: tuple[KubeletFlag, ...] = NOT_IMPLEMENTED + DEPRECATED


def warning(flag: KubeletFlag) -> str:
    """The one line said when ``flag`` is given."""
    if flag.deprecated:
        return f"Flag --{flag.name} has been deprecated: {flag.deprecated}; ignored"
    return f"flag --{flag.name} is NOT IMPLEMENTED by pkletd; its value is ignored"
