"""The pod's host names and the kubelet-managed /etc/hosts, to the byte; and what PodSetup
gives the sandbox (hostname, resolver) and each container (the hosts mount)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.ipc.runtime.cri import DnsSpec, ImageInfo, MountSpec
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.nodeinfo import DnsSettings, NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.setup import podhosts, runtimespec
from pkletd.supervisor.pods.setup.envvars import ConfigError
from pkletd.supervisor.pods.setup.podhosts import FqdnTooLong, HostsFile, PodNames
from pkletd.supervisor.pods.setup.podsetup import PodSetup, SandboxConfigError

LOCALHOST = (
    "# Kubernetes-managed hosts file.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)
ALIASES = [
    {"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]},
    {"ip": "10.1.2.4", "hostnames": ["baz.local"]},
]
ALIAS_BLOCK = (
    "\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n10.1.2.4\tbaz.local\n"
)


def pod(name: str = "web", mounts: list[dict[str, Any]] | None = None, **spec: Any) -> Pod:
    container: dict[str, Any] = {"name": "app", "image": "busybox"}
    if mounts:
        container["volumeMounts"] = mounts
        spec["volumes"] = [{"name": m["name"], "emptyDir": {}} for m in mounts]
    return parse_pod(
        {
            "metadata": {"name": name, "namespace": "prod", "uid": "u1"},
            "spec": {"containers": [container], **spec},
        }
    )


def node(tmp_path: Path, domain: str = "cluster.local") -> NodeInfo:
    dns = DnsSettings(("10.96.0.10",), domain, "")
    return NodeInfo("n1", ("192.0.2.9",), tmp_path / "root", dns=dns)


def test_names_from_the_pod_name_or_hostname_and_subdomain() -> None:
    assert podhosts.pod_names(pod(), "cluster.local") == PodNames("web", "")
    named = pod(hostname="db-0", subdomain="db")
    assert podhosts.pod_names(named, "cluster.local") == PodNames(
        "db-0", "db.prod.svc.cluster.local"
    )
    long = pod("a" * 62 + "-b" + "c" * 10)  # cut at 63 ends in "-": trimmed
    assert podhosts.pod_names(long, "cluster.local").hostname == "a" * 62


def test_kernel_hostname_is_the_fqdn_only_when_asked_and_with_a_domain() -> None:
    plain = pod(hostname="db-0", subdomain="db")
    names = podhosts.pod_names(plain, "cluster.local")
    assert podhosts.kernel_hostname(plain, names) == "db-0"
    fqdn = pod(hostname="db-0", subdomain="db", setHostnameAsFQDN=True)
    assert podhosts.kernel_hostname(fqdn, names) == "db-0.db.prod.svc.cluster.local"
    no_domain = pod(setHostnameAsFQDN=True)
    assert podhosts.kernel_hostname(no_domain, PodNames("web", "")) == "web"


def test_fqdn_over_64_characters_is_the_kubelets_error() -> None:
    long = pod(hostname="h" * 30, subdomain="s" * 20, setHostnameAsFQDN=True)
    names = podhosts.pod_names(long, "cluster.local")
    fqdn = f"{'h' * 30}.{'s' * 20}.prod.svc.cluster.local"
    with pytest.raises(FqdnTooLong) as caught:
        podhosts.kernel_hostname(long, names)
    assert str(caught.value) == (
        "failed to construct FQDN from pod hostname and cluster domain, FQDN "
        f"{fqdn} is too long (64 characters is the max, 74 characters requested)"
    )


def test_managed_content() -> None:
    names = PodNames("web", "")
    assert podhosts.managed_content(("10.88.0.5",), names, ()) == LOCALHOST + "10.88.0.5\tweb\n"
    names = PodNames("db-0", "db.prod.svc.cluster.local")
    parsed = pod(hostAliases=ALIASES).dns.host_aliases
    assert podhosts.managed_content(("10.88.0.5", "fd00::5"), names, parsed) == (
        LOCALHOST
        + "10.88.0.5\tdb-0.db.prod.svc.cluster.local\tdb-0\n"
        + "fd00::5\tdb-0.db.prod.svc.cluster.local\tdb-0\n"
        + ALIAS_BLOCK
    )


def test_host_network_content_is_the_nodes_file_with_the_aliases(tmp_path: Path) -> None:
    node_hosts = tmp_path / "hosts"
    node_hosts.write_text("127.0.0.1 localhost\n192.0.2.9 n1\n")
    hosts = HostsFile(node(tmp_path), node_hosts)
    host_pod = pod(hostNetwork=True, hostAliases=ALIASES)
    mount = hosts.mount(host_pod, host_pod.containers[0], ("192.0.2.9",))
    assert mount is not None
    assert Path(mount.host_path).read_text() == (
        "# Kubernetes-managed hosts file (host network).\n"
        "127.0.0.1 localhost\n192.0.2.9 n1\n" + ALIAS_BLOCK
    )


def test_hosts_file_written_in_place_and_mounted(tmp_path: Path) -> None:
    hosts = HostsFile(node(tmp_path))
    web = pod()
    mount = hosts.mount(web, web.containers[0], ("10.88.0.5",))
    path = tmp_path / "root" / "pods" / "u1" / "etc-hosts"
    assert mount == MountSpec("/etc/hosts", str(path), readonly=False)
    assert path.read_text() == LOCALHOST + "10.88.0.5\tweb\n"
    assert path.stat().st_mode & 0o777 == 0o644
    inode = path.stat().st_ino
    hosts.mount(web, web.containers[0], ("10.88.0.6",))  # a running container sees the change
    assert path.stat().st_ino == inode
    assert path.read_text().endswith("10.88.0.6\tweb\n")


def test_no_hosts_mount_without_an_ip_or_over_the_containers_own(tmp_path: Path) -> None:
    hosts = HostsFile(node(tmp_path))
    web = pod()
    assert hosts.mount(web, web.containers[0], ()) is None
    own = pod(mounts=[{"name": "h", "mountPath": "/etc/hosts"}])
    assert hosts.mount(own, own.containers[0], ("10.88.0.5",)) is None
    assert not (tmp_path / "root" / "pods" / "u1" / "etc-hosts").exists()


def setup(tmp_path: Path, domain: str = "cluster.local") -> PodSetup:
    return PodSetup(node(tmp_path, domain), ApiObjects(standalone=True), EventRecorder())


def test_sandbox_gets_its_hostname_and_resolver(tmp_path: Path) -> None:
    named = pod(hostname="db-0", subdomain="db", setHostnameAsFQDN=True)
    spec = setup(tmp_path).sandbox_spec(named, runtimespec.sandbox_spec(named, 0, tmp_path))
    assert spec.hostname == "db-0.db.prod.svc.cluster.local"
    assert spec.dns == DnsSpec(
        ("10.96.0.10",),
        ("prod.svc.cluster.local", "svc.cluster.local", "cluster.local"),
        ("ndots:5",),
    )
    host = pod(hostNetwork=True, hostname="db-0")
    spec = setup(tmp_path).sandbox_spec(host, runtimespec.sandbox_spec(host, 0, tmp_path))
    assert spec.hostname == ""  # the node's


def test_sandbox_config_errors_are_the_kubelets(tmp_path: Path) -> None:
    long = pod(hostname="h" * 40, subdomain="s" * 20, setHostnameAsFQDN=True)
    with pytest.raises(SandboxConfigError, match="^failed to construct FQDN from pod hostname"):
        setup(tmp_path).sandbox_spec(long, runtimespec.sandbox_spec(long, 0, tmp_path))


def test_each_container_gets_the_hosts_mount_after_its_volumes(tmp_path: Path) -> None:
    web = pod(mounts=[{"name": "data", "mountPath": "/data"}])
    pods = setup(tmp_path)
    pods.blocked(web)
    container = web.containers[0]
    spec = runtimespec.container_spec(web, container, 0)
    made = pods.container_spec(web, container, spec, "10.88.0.5", ImageInfo("sha256:i", 0))
    # the kubelet's order: the volumes, its hosts file, then the termination message file
    paths = [m.container_path for m in made.mounts]
    assert paths == ["/data", "/etc/hosts", "/dev/termination-log"]
    pods.teardown(web.uid)
    assert not (tmp_path / "root" / "pods" / "u1").exists()


def test_host_network_pod_with_too_long_fqdn_fails_its_containers(tmp_path: Path) -> None:
    long = pod(hostNetwork=True, hostname="h" * 40, subdomain="s" * 20, setHostnameAsFQDN=True)
    container = long.containers[0]
    spec = runtimespec.container_spec(long, container, 0)
    with pytest.raises(ConfigError, match="is too long"):
        setup(tmp_path).container_spec(long, container, spec, "", ImageInfo("sha256:i", 0))
