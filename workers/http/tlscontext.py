"""The kubelet API's TLS: its serving certificate, versions, cipher suites, and the CA
that client certificates are verified against (``authentication.x509.clientCAFile``).

With a client CA the server asks for a certificate but does not require one (the
kubelet's ``tls.RequestClientCert``): a request without one may still authenticate by
token or anonymously. Unlike Go, OpenSSL verifies a presented certificate during the
handshake, so a certificate the CA did not sign fails the handshake rather than getting
a 401.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from pkletd.ipc import tlsnames
from pkletd.workers.http import selfsigned
from pkletd.workers.http.options import TlsOptions
from pkletd.workers.http.servingcert import RotatingCertificate


class TlsError(Exception):
    """The serving certificate, key or client CA cannot be used; the message says which."""


def server_context(options: TlsOptions, client_ca_file: str, host: str) -> ssl.SSLContext:
    """The listening context; with ``serverTLSBootstrap`` (and no certificate files) one
    whose connections each get the current pair from the CSR API (``servingcert``)."""
    if options.bootstrap and not (options.cert_file or options.key_file):
        context = _settings(options, client_ca_file)
        rotating = RotatingCertificate(
            Path(options.cert_dir), lambda: _settings(options, client_ca_file)
        )
        rotating.install(context)
        return context
    context = _settings(options, client_ca_file)
    cert_file, key_file = _serving_pair(options, host)
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"serving certificate {cert_file} or key {key_file}: {exc}") from None
    return context


def _settings(options: TlsOptions, client_ca_file: str) -> ssl.SSLContext:
    """A context with every setting but the serving certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = tlsnames.TLS_VERSIONS[
        options.min_version or tlsnames.DEFAULT_MIN_VERSION
    ]
    if options.cipher_suites:
        ciphers = tlsnames.openssl_ciphers(options.cipher_suites)
        if ciphers:
            try:
                context.set_ciphers(ciphers)
            except ssl.SSLError as exc:
                raise TlsError(f"tlsCipherSuites: none usable here: {exc}") from None
    if client_ca_file:
        try:
            context.load_verify_locations(cafile=client_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(f"client CA file {client_ca_file}: {exc}") from None
        context.verify_mode = ssl.CERT_OPTIONAL
    context.set_alpn_protocols(["http/1.1"])
    return context


def _serving_pair(options: TlsOptions, host: str) -> tuple[str, str]:
    if options.cert_file or options.key_file:
        return options.cert_file, options.key_file
    try:
        pair = selfsigned.ensure(Path(options.cert_dir), host)
    except OSError as exc:
        raise TlsError(f"self-signed certificate in {options.cert_dir}: {exc}") from None
    return str(pair.cert_file), str(pair.key_file)
