"""The contract suite's ``cluster`` fixture (a server of every carrier: same-host socket, thread-pool gRPC,
grpc.aio) for the other transport tests that hold every carrier to the same answer."""

from tests.transport.test_contract import cluster  # noqa: F401 - a fixture
