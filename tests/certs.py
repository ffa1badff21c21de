"""Self-signed TLS certificates for tests (made with the openssl command line; tests skip without it)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest


def self_signed_cert(directory: pathlib.Path, name: str = "localhost") -> tuple[pathlib.Path, pathlib.Path]:
    """Writes ``key.pem`` and ``cert.pem`` (a self-signed certificate for DNS ``name`` and, for ``localhost``, IP
    127.0.0.1) into ``directory``; returns their paths. Skips the calling test when openssl is missing."""
    openssl = shutil.which("openssl")
    if not openssl:
        pytest.skip("openssl is not installed")
    directory.mkdir(parents=True, exist_ok=True)
    key, cert = directory / "key.pem", directory / "cert.pem"
    alt_names = f"DNS:{name}" + (",IP:127.0.0.1" if name == "localhost" else "")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
         "-addext", f"subjectAltName={alt_names}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )
    return key, cert
