"""gRPC reflection as the standard Python client sees it: v1alpha (what grpcio-reflection
speaks) and v1 beside it, each listing only the services of the port asked."""

from __future__ import annotations

import grpc
from conftest import Daemon
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

REFLECTION = {"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}


def services_v1(channel: grpc.Channel) -> set[str]:
    """ListServices over grpc.reflection.v1 (its messages are wire-identical to v1alpha's)."""
    call = channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    (answer,) = list(call(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10))
    return {service.name for service in answer.list_services_response.service}


def test_the_sessions_port_lists_what_it_serves(start_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon: Daemon = start_daemon(registry=True)
    with grpc.insecure_channel(daemon.addr) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        expected = {"agentsessions.v1.Sessions", "grpc.health.v1.Health"} | REFLECTION
        assert set(database.get_services()) == expected
        assert services_v1(channel) == expected
        # The standard client resolves the whole contract from the server alone.
        pool = descriptor_pool.DescriptorPool(database)
        service = pool.FindServiceByName("agentsessions.v1.Sessions")
        assert "Exec" in service.methods_by_name
        assert pool.FindMessageTypeByName("agentsessions.v1.LogRecord").fields_by_name["event"]
    with grpc.insecure_channel(daemon.registry) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        assert set(database.get_services()) == {"agentsessions.v1.HarnessRegistry"} | REFLECTION
        assert services_v1(channel) == {"agentsessions.v1.HarnessRegistry"} | REFLECTION
