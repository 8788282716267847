"""A pod's host names and the kubelet-managed ``/etc/hosts`` (``kubelet_pods.go``).

The hostname is ``spec.hostname``, else the pod's name, cut to 63 characters without
a trailing ``-`` or ``.``; with ``spec.subdomain`` the domain is
``<subdomain>.<namespace>.svc.<clusterDomain>``. ``setHostnameAsFQDN`` makes the
kernel's hostname ``<hostname>.<domain>``, which may not pass 64 characters
(``FqdnTooLong``, with the kubelet's message).

The hosts file is ``<root-dir>/pods/<uid>/etc-hosts``, written in place (mode 0644, so
running containers see the new text) each time a container of the pod is created, and
bind-mounted read-write at ``/etc/hosts`` into each container that does not mount
something there itself, once the pod has an IP. A pod on the pod network gets the
kubelet's managed text (localhost lines, one line per pod IP with its names); a
hostNetwork pod a copy of the node's ``/etc/hosts`` under a header. Both end with the
``hostAliases`` block, one line per alias IP.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from pkletd.ipc.apimodel.dnsspec import HostAlias
from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.runtime.cri import MountSpec
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.setup.resolvconf import go_errno_text

log = logging.getLogger(__name__)

ETC_HOSTS = "/etc/hosts"
HOSTS_FILE = "etc-hosts"
HOSTNAME_MAX = 63  # the kernel's 64 bytes, less the terminating NUL
FQDN_MAX = 64
MANAGED_HEADER = "# Kubernetes-managed hosts file.\n"
HOST_NETWORK_HEADER = "# Kubernetes-managed hosts file (host network).\n"
LOCALHOST_LINES = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)


class FqdnTooLong(Exception):
    """``setHostnameAsFQDN`` asked for a kernel hostname the kernel cannot hold."""


class HostsFileError(Exception):
    """The node's hosts file (for a hostNetwork pod) cannot be read, or the pod's written."""


@dataclass(frozen=True, slots=True)
class PodNames:
    hostname: str
    domain: str  # "" without a subdomain


def pod_names(pod: Pod, cluster_domain: str) -> PodNames:
    """``GeneratePodHostNameAndDomain``."""
    wanted = pod.dns.hostname or pod.name
    hostname = wanted
    if len(wanted) > HOSTNAME_MAX:
        hostname = wanted[:HOSTNAME_MAX].rstrip("-.")
        log.warning("pod hostname truncated pod=%s hostname=%s", pod.full_name, hostname)
    subdomain = pod.dns.subdomain
    domain = f"{subdomain}.{pod.namespace}.svc.{cluster_domain}" if subdomain else ""
    return PodNames(hostname, domain)


def kernel_hostname(pod: Pod, names: PodNames) -> str:
    """The hostname the pod's sandbox gets (``GetNodenameForKernel``)."""
    if not (pod.dns.set_hostname_as_fqdn and names.domain):
        return names.hostname
    fqdn = f"{names.hostname}.{names.domain}"
    if len(fqdn) > FQDN_MAX:
        raise FqdnTooLong(
            "failed to construct FQDN from pod hostname and cluster domain, FQDN "
            f"{fqdn} is too long ({FQDN_MAX} characters is the max, {len(fqdn)} characters "
            "requested)"
        )
    return fqdn


def managed_content(ips: tuple[str, ...], names: PodNames, aliases: tuple[HostAlias, ...]) -> str:
    """``managedHostsFileContent``: a pod on the pod network."""
    if names.domain:
        own = "".join(f"{ip}\t{names.hostname}.{names.domain}\t{names.hostname}\n" for ip in ips)
    else:
        own = "".join(f"{ip}\t{names.hostname}\n" for ip in ips)
    return MANAGED_HEADER + LOCALHOST_LINES + own + aliases_block(aliases)


def node_content(node_file: str, aliases: tuple[HostAlias, ...]) -> str:
    """``nodeHostsFileContent``: a hostNetwork pod, the node's file as it is."""
    return HOST_NETWORK_HEADER + node_file + aliases_block(aliases)


def aliases_block(aliases: tuple[HostAlias, ...]) -> str:
    if not aliases:
        return ""
    lines = "".join(a.ip + "\t" + "\t".join(a.hostnames) + "\n" for a in aliases)
    return "\n# Entries added by HostAliases.\n" + lines


class HostsFile:
    def __init__(self, node: NodeInfo, node_hosts: Path = Path(ETC_HOSTS)) -> None:
        self._node = node
        self._node_hosts = node_hosts

    def path(self, pod: Pod) -> Path:
        return self._node.pods_dir / pod.uid / HOSTS_FILE

    def mount(self, pod: Pod, container: Container, ips: tuple[str, ...]) -> MountSpec | None:
        """Write the pod's hosts file and give its mount (``makeHostsMount``), unless the
        pod has no IP yet or the container mounts a volume at ``/etc/hosts``."""
        if not ips or any(m.mount_path == ETC_HOSTS for m in container.volume_mounts):
            return None
        names = pod_names(pod, self._node.dns.cluster_domain)
        if pod.host_network:
            text = node_content(self._read_node_file(), pod.dns.host_aliases)
        else:
            text = managed_content(ips, names, pod.dns.host_aliases)
        path = self.path(pod)
        try:
            path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
            with open(path, "w") as file:  # in place: mounted into running containers
                file.write(text)
            os.chmod(path, 0o644)
        except OSError as exc:
            raise HostsFileError(f"open {path}: {go_errno_text(exc)}") from exc
        return MountSpec(container_path=ETC_HOSTS, host_path=str(path), readonly=False)

    def _read_node_file(self) -> str:
        try:
            return self._node_hosts.read_text(errors="replace")
        except OSError as exc:
            raise HostsFileError(f"open {self._node_hosts}: {go_errno_text(exc)}") from exc
