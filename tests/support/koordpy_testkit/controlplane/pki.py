"""Certificates and keys of the test control plane, made with the ``openssl`` command.

One CA signs the kube-apiserver's serving certificate (SANs 127.0.0.1 and localhost, serverAuth) and
the certificates of the other components' secure ports; one RSA key pair signs ServiceAccount tokens.
Keys are 2048-bit RSA, valid for 10 days: enough for a test session or a developer's afternoon.

Not guaranteed: anything beyond loopback use (no CRL, no rotation, keys readable by the user).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from koordpy_testkit.bounds import HANG_BACKSTOP

__all__ = ["Pki", "client_certificate", "make_pki", "serving_certificate"]

DAYS = "10"


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=HANG_BACKSTOP, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed ({result.returncode}):\n{result.stderr}")


def make_pki(directory: Path) -> Pki:
    """Create (or reuse, when complete) the CA, the serving certificate and the ServiceAccount key pair."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the test control plane needs the openssl command to make its certificates")
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "serving.crt",
        serving_key=directory / "serving.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
    )
    if all(p.exists() for p in (pki.ca_cert, pki.ca_key, pki.serving_cert, pki.serving_key, pki.sa_key, pki.sa_pub)):
        return pki
    (directory / "ca.cnf").write_text(
        "[req]\ndistinguished_name=dn\nprompt=no\nx509_extensions=v3_ca\n[dn]\nCN=koordpy-test-ca\n"
        "[v3_ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign,digitalSignature\n"
        "subjectKeyIdentifier=hash\n"
    )
    (directory / "serving.ext").write_text(
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost,"
        "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1\n"
        "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n"
    )
    _openssl("genrsa", "-out", "ca.key", "2048", cwd=directory)
    _openssl(
        "req", "-x509", "-new", "-key", "ca.key", "-days", DAYS, "-config", "ca.cnf", "-out", "ca.crt", cwd=directory
    )
    _openssl("genrsa", "-out", "serving.key", "2048", cwd=directory)
    _openssl("req", "-new", "-key", "serving.key", "-subj", "/CN=127.0.0.1", "-out", "serving.csr", cwd=directory)
    _openssl(
        "x509", "-req", "-in", "serving.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", DAYS, "-extfile", "serving.ext", "-out", "serving.crt", cwd=directory,
    )  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=directory)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)
    return pki


def client_certificate(
    pki: Pki, directory: Path, name: str, *, common_name: str, organization: str
) -> tuple[Path, Path]:
    """A client certificate (and its key) signed by the CA the API server trusts for clients: the API server
    authenticates its holder as user ``common_name`` in group ``organization`` (a kubelet:
    ``system:node:<node>`` in ``system:nodes``). Returns (certificate, key)."""
    directory.mkdir(parents=True, exist_ok=True)
    key, csr, cert, ext = (directory / f"{name}{suffix}" for suffix in (".key", ".csr", ".crt", ".ext"))
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\n"
    )
    _openssl("genrsa", "-out", str(key), "2048", cwd=directory)
    _openssl(
        "req", "-new", "-key", str(key), "-subj", f"/O={organization}/CN={common_name}", "-out", str(csr), cwd=directory
    )
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(pki.ca_cert), "-CAkey", str(pki.ca_key), "-CAcreateserial",
        "-days", DAYS, "-extfile", str(ext), "-out", str(cert), cwd=directory,
    )  # fmt: skip
    return cert, key


def serving_certificate(pki: Pki, directory: Path, name: str, dns_names: list[str]) -> tuple[Path, Path]:
    """A serving certificate (and its key) signed by the CA, for ``dns_names`` and 127.0.0.1: what
    cert-manager or an operator writes into a component's TLS Secret. Returns (certificate, key)."""
    directory.mkdir(parents=True, exist_ok=True)
    key, csr, cert, ext = (directory / f"{name}{suffix}" for suffix in (".key", ".csr", ".crt", ".ext"))
    names = ",".join([*(f"DNS:{n}" for n in dns_names), "IP:127.0.0.1"])
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage=serverAuth\nsubjectAltName={names}\n"
    )
    _openssl("genrsa", "-out", str(key), "2048", cwd=directory)
    _openssl("req", "-new", "-key", str(key), "-subj", f"/CN={dns_names[0]}", "-out", str(csr), cwd=directory)
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(pki.ca_cert), "-CAkey", str(pki.ca_key), "-CAcreateserial",
        "-days", DAYS, "-extfile", str(ext), "-out", str(cert), cwd=directory,
    )  # fmt: skip
    return cert, key
