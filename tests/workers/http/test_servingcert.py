"""The kubelet API's certificate from the CSR API, swapped without a restart: before
there is one every handshake fails; then new connections get the current pair, and the
next one once the link moves, on the same listening socket."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from pkletd.workers.http.servingcert import RotatingCertificate

from tests.harness.apiserver.certs import Pki


def base_context() -> ssl.SSLContext:
    return ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)


def new_pair(pki: Pki, cert_dir: Path, stem: str) -> x509.Certificate:
    cert, key = pki.serving_cert_for(stem, cert_dir)
    pair = cert_dir / f"kubelet-server-{stem}.pem"
    pair.write_bytes(cert.read_bytes() + key.read_bytes())
    link = cert_dir / "kubelet-server-updated.pem"
    link.symlink_to(pair.name)
    link.replace(cert_dir / "kubelet-server-current.pem")
    return x509.load_pem_x509_certificate(cert.read_bytes())


def served(listener: socket.socket, context: ssl.SSLContext, ca: Path) -> x509.Certificate:
    """Connect once (the server side accepts and handshakes on a thread)."""

    def accept() -> None:
        conn, _ = listener.accept()
        try:
            with context.wrap_socket(conn, server_side=True):
                pass
        except (ssl.SSLError, OSError):
            pass

    server = threading.Thread(target=accept)
    server.start()
    client = ssl.create_default_context(cafile=str(ca))
    try:
        with (
            socket.create_connection(listener.getsockname()) as raw,
            client.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            der = tls.getpeercert(binary_form=True)
            assert der is not None
            return x509.load_der_x509_certificate(der)
    finally:
        server.join()


def test_new_connections_get_the_current_pair(tmp_path: Path) -> None:
    pki = Pki(tmp_path / "ca")
    cert_dir = tmp_path / "pki"
    cert_dir.mkdir()
    rotating = RotatingCertificate(cert_dir, base_context)
    context = base_context()
    rotating.install(context)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        with pytest.raises(ssl.SSLError):
            served(listener, context, pki.ca_cert_path)
        first = new_pair(pki, cert_dir, "one")
        assert served(listener, context, pki.ca_cert_path).serial_number == first.serial_number
        second = new_pair(pki, cert_dir, "two")
        assert served(listener, context, pki.ca_cert_path).serial_number == second.serial_number
