"""A pod's resolver, made as the kubelet's ``dns.Configurer`` makes it (``GetPodDNS``).

The base comes from ``dnsPolicy``:

- ``ClusterFirst`` (and ``ClusterFirstWithHostNet``): the ``clusterDNS`` servers, the
  searches ``<ns>.svc.<clusterDomain> svc.<clusterDomain> <clusterDomain>`` then the
  node's, and only ``ndots:5``. A hostNetwork pod with ``ClusterFirst`` gets
  ``Default``; so does any pod when no ``clusterDNS`` is set, with the kubelet's
  ``MissingClusterDNS`` warning on the node and on the pod.
- ``Default``: the node's file as parsed (``resolvconf``); with ``resolvConf: ""`` a
  local nameserver per ``--node-ip`` (``127.0.0.1`` or ``::1``) and the search ``.``,
  which turns lookups off.
- ``None``: nothing.

``dnsConfig`` is added on top: its nameservers and searches appended (duplicates
dropped, the first kept), its options merged by name with the pod's value winning.
Then the kubelet's limits: the first 3 nameservers, the first 32 searches without any
longer than 253 characters, and searches dropped from the end until the line fits in
2048 characters, each cut told by a ``DNSConfigForming`` warning on the pod. The node
file is read at every sandbox config, as by the kubelet: one that cannot be read or
parsed fails the pod's sandbox (``ResolvConfError``).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable

from pkletd.ipc.apimodel.dnsspec import (
    MAX_NAMESERVERS,
    MAX_SEARCH_CHARS,
    MAX_SEARCHES,
    DnsConfig,
    DnsPolicy,
)
from pkletd.ipc.apimodel.podspec import Pod
from pkletd.ipc.runtime.cri import DnsSpec
from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason
from pkletd.supervisor.pods.nodeinfo import DnsSettings
from pkletd.supervisor.pods.setup import resolvconf
from pkletd.supervisor.pods.setup.resolvconf import MAX_SEARCH_LENGTH, Resolver

log = logging.getLogger(__name__)

DEFAULT_OPTIONS = ("ndots:5",)
MISSING_CLUSTER_DNS = (
    'kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" '
    'policy. Falling back to "Default" policy.'
)


class DnsConfigurer:
    """Called on pod-worker threads; the event recorder is thread-safe."""

    def __init__(self, settings: DnsSettings, node_name: str, events: EventRecorder) -> None:
        self._settings = settings
        self._node = ObjectRef.node(node_name)
        self._events = events

    def check_node_file(self) -> None:
        """The kubelet's start-up check of the node's file: a Warning on the node
        (``CheckLimitsForResolvConf``) if pods would have to cut its search line."""
        path = self._settings.resolv_conf
        problem = resolvconf.limits_problem(path, self._settings.cluster_domain) if path else None
        if problem is not None:
            self._events.warning(self._node, Reason.CHECK_LIMITS_FOR_RESOLV_CONF, problem)

    def pod_dns(self, pod: Pod) -> DnsSpec:
        """The pod's ``DNSConfig``; ResolvConfError if the node's file cannot be used."""
        node = resolvconf.read(self._settings.resolv_conf)
        base = self._base(pod, node)
        if pod.dns.config is not None:
            base = _appended(base, pod.dns.config)
        servers = self._fit_servers(pod, base.servers)
        searches = self._fit_searches(pod, base.searches)
        return DnsSpec(servers, searches, base.options)

    def _base(self, pod: Pod, node: Resolver) -> Resolver:
        policy = pod.dns.policy
        if policy is DnsPolicy.NONE:
            return Resolver()
        cluster = policy is DnsPolicy.CLUSTER_FIRST_WITH_HOST_NET or (
            policy is DnsPolicy.CLUSTER_FIRST and not pod.host_network
        )
        if cluster and self._settings.cluster_dns:
            searches = self._cluster_searches(pod, node.searches)
            return Resolver(self._settings.cluster_dns, searches, DEFAULT_OPTIONS)
        if cluster:
            self._events.warning(self._node, Reason.MISSING_CLUSTER_DNS, MISSING_CLUSTER_DNS)
            where = f"{pod.name}_{pod.namespace}({pod.uid})"
            message = f'pod: "{where}". {MISSING_CLUSTER_DNS}'
            self._events.warning(ObjectRef.of(pod), Reason.MISSING_CLUSTER_DNS, message)
        if self._settings.resolv_conf:
            return node
        return Resolver(self._local_servers(), (".",), node.options)

    def _cluster_searches(self, pod: Pod, node_searches: tuple[str, ...]) -> tuple[str, ...]:
        domain = self._settings.cluster_domain
        if not domain:
            return node_searches
        return _unique((f"{pod.namespace}.svc.{domain}", f"svc.{domain}", domain, *node_searches))

    def _local_servers(self) -> tuple[str, ...]:
        """One local server per node IP, of its family: lookups go nowhere."""
        ips = self._settings.node_ips
        found = tuple("::1" if ipaddress.ip_address(ip).version == 6 else "127.0.0.1" for ip in ips)
        return found or ("127.0.0.1",)

    def _fit_servers(self, pod: Pod, servers: tuple[str, ...]) -> tuple[str, ...]:
        if len(servers) <= MAX_NAMESERVERS:
            return servers
        kept = servers[:MAX_NAMESERVERS]
        self._forming(
            pod,
            "Nameserver limits were exceeded, some nameservers have been omitted, the applied "
            f"nameserver line is: {' '.join(kept)}",
        )
        return kept

    def _fit_searches(self, pod: Pod, searches: tuple[str, ...]) -> tuple[str, ...]:
        kept = [s for s in searches[:MAX_SEARCHES] if len(s) <= MAX_SEARCH_LENGTH]
        while kept and len(" ".join(kept)) > MAX_SEARCH_CHARS:
            kept.pop()
        if len(kept) == len(searches):
            return searches
        self._forming(
            pod,
            "Search Line limits were exceeded, some search paths have been omitted, the "
            f"applied search line is: {' '.join(kept)}",
        )
        return tuple(kept)

    def _forming(self, pod: Pod, message: str) -> None:
        log.error("dns config cut pod=%s why=%s", pod.full_name, message)
        self._events.warning(ObjectRef.of(pod), Reason.DNS_CONFIG_FORMING, message)


def _appended(base: Resolver, config: DnsConfig) -> Resolver:
    """``dnsConfig`` on top of the base (``appendDNSConfig``)."""
    options = dict(_option_pair(o) for o in base.options)
    options.update((o.name, o.value or "") for o in config.options)
    return Resolver(
        _unique((*base.servers, *config.nameservers)),
        _unique((*base.searches, *config.searches)),
        tuple(f"{name}:{value}" if value else name for name, value in options.items()),
    )


def _option_pair(option: str) -> tuple[str, str]:
    name, _, value = option.partition(":")
    return name, value


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))
