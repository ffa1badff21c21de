"""TLS from PEM files (seed_rl.transport.tls) and the TLS settings of the config: clear errors for bad input."""

import dataclasses

import grpc
import pytest

from seed_rl.config import TransportConfig
from seed_rl.transport import tls
from tests.certs import self_signed_cert


@pytest.fixture(scope="module")
def cert_files(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


def test_credentials_from_pem_files(cert_files):
    key, cert = cert_files
    assert isinstance(tls.server_credentials(str(cert), str(key)), grpc.ServerCredentials)
    assert isinstance(tls.channel_credentials(str(cert)), grpc.ChannelCredentials)
    assert tls.server_credentials("", "") is None and tls.channel_credentials("") is None
    assert tls.channel_options("learner.example") == [("grpc.ssl_target_name_override", "learner.example")]
    assert tls.channel_options("") == []


def test_bad_tls_files_get_errors_that_name_the_setting(cert_files, tmp_path):
    key, cert = cert_files
    with pytest.raises(ValueError, match=r"tls_key_file is empty"):
        tls.server_credentials(str(cert), "")
    with pytest.raises(ValueError, match=r"tls_cert_file is empty"):
        tls.server_credentials("", str(key))
    with pytest.raises(ValueError, match=r"tls_cert_file: cannot read .*nope\.pem"):
        tls.server_credentials(str(tmp_path / "nope.pem"), str(key))
    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"not a certificate")
    with pytest.raises(ValueError, match=r"tls_ca_file: .*garbage\.pem.* is not a PEM file"):
        tls.channel_credentials(str(garbage))


def test_run_config_checks_the_tls_settings_together():
    base = TransportConfig()
    assert dataclasses.replace(base, tls_cert_file="c.pem", tls_key_file="k.pem").tls_cert_file == "c.pem"
    with pytest.raises(ValueError, match="both tls_cert_file and tls_key_file"):
        dataclasses.replace(base, tls_cert_file="c.pem")
    with pytest.raises(ValueError, match="apply when the learner serves TLS"):
        dataclasses.replace(base, tls_ca_file="ca.pem")
    with pytest.raises(ValueError, match="apply when the learner serves TLS"):
        dataclasses.replace(base, tls_server_name="learner.example")
