"""Connecting with mutual TLS and with a bearer token, against a daemon that requires them."""

from __future__ import annotations

import datetime
import ipaddress
import time
from collections.abc import Callable
from pathlib import Path

import jwt
import pytest
from conftest import Daemon
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agentsessions import Client, Tls, errors

ISSUER = "https://idp.test"
AUDIENCE = "agentsessions"


class Ca:
    """A throwaway certificate authority."""

    def __init__(self, name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    def issue(self, common_name: str, names: list[x509.GeneralName], server: bool) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = x509.oid.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        pem_key = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return cert.public_bytes(serialization.Encoding.PEM), pem_key

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)


def test_mutual_tls(tmp_path: Path, start_daemon: Callable[..., Daemon]) -> None:
    ca = Ca("py test ca")
    server_cert, server_key = ca.issue(
        "localhost", [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))], server=True
    )
    client_cert, client_key = ca.issue("py", [x509.UniformResourceIdentifier("spiffe://example/py")], server=False)
    stranger_cert, stranger_key = Ca("other").issue(
        "intruder", [x509.UniformResourceIdentifier("spiffe://example/intruder")], server=False
    )
    for name, data in {"ca.pem": ca.pem, "server.pem": server_cert, "server.key": server_key}.items():
        (tmp_path / name).write_bytes(data)
    config = tmp_path / "mtls.toml"
    config.write_text(
        '[auth]\nrequire_authentication = true\n[auth.tls]\ncert = "server.pem"\nkey = "server.key"\n'
        'client_ca = "ca.pem"\n'
    )
    daemon = start_daemon("--config", str(config))
    trusted = Tls(ca=ca.pem, cert=client_cert, key=client_key)
    with Client(daemon.addr, tls=trusted) as client:
        result = client.run("over mtls", harness="echo")
        assert result.output == "echo:over mtls"
        assert client.verify(result.session.metadata.uid).ok
    with Client(daemon.addr, tls=Tls(ca=ca.pem, cert=stranger_cert, key=stranger_key), timeout=10) as client:
        with pytest.raises(errors.AgentSessionsError) as refused:
            client.create_session(harness="echo")
        assert refused.value.code in (errors.Unavailable.code, errors.Unauthenticated.code)
    with Client(daemon.addr, tls=Tls(ca=ca.pem), timeout=10) as client:
        with pytest.raises(errors.AgentSessionsError) as anonymous:
            client.create_session(harness="echo")
        assert anonymous.value.code in (errors.Unavailable.code, errors.Unauthenticated.code)


def test_bearer_token(tmp_path: Path, start_daemon: Callable[..., Daemon]) -> None:
    secret = b"py-test-secret-py-test-secret-32"
    (tmp_path / "secret").write_bytes(secret)
    config = tmp_path / "jwt.toml"
    config.write_text(
        f'[auth]\nrequire_authentication = true\n[auth.jwt]\nissuers = ["{ISSUER}"]\naudience = "{AUDIENCE}"\n'
        '[[auth.jwt.hmac_keys]]\nsecret_file = "secret"\nalgorithm = "HS256"\n'
    )
    daemon = start_daemon("--config", str(config))
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": "alice", "aud": AUDIENCE, "iat": now, "nbf": now - 5, "exp": now + 600}
    token = jwt.encode(claims, secret, algorithm="HS256")
    with Client(daemon.addr, token=token) as client:
        result = client.run("with a token", harness="echo")
        assert result.output == "echo:with a token"
        assert client.verify(result.session.metadata.uid).ok
    with Client(daemon.addr) as client, pytest.raises(errors.Unauthenticated):
        client.create_session(harness="echo")
    forged = jwt.encode(claims, b"another-secret-another-secret-32", algorithm="HS256")
    with Client(daemon.addr, token=forged) as client, pytest.raises(errors.Unauthenticated):
        client.list_sessions().__next__()
