"""The embedded 3-node NATS cluster, and a process's connection to it: every server of
`NATS_URL` given to nats-py, so a process starts while one is down and moves to another
node when its own goes away."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nats.js.api import StreamInfo
from servicekit.embedded.nats import EmbeddedNatsCluster
from servicekit.embedded.network import free_port
from servicekit.runtime import NatsConnection
from servicekit.settings import ServiceSettings
from structlog.testing import capture_logs


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedNatsCluster]:
    nodes = EmbeddedNatsCluster(tmp_path / "cluster", name="kit")
    nodes.start()
    yield nodes
    nodes.stop()


async def leader_elected(
    connection: NatsConnection, stream: str, timeout: float = 30
) -> StreamInfo:
    """The stream's info once it has a leader (none while one is elected)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            info = await connection.client.jetstream(timeout=1).stream_info(stream)
            if info.cluster is not None and info.cluster.leader:
                return info
        except Exception:  # no leader yet, or the request went to the node that went away
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


async def test_a_process_starts_when_the_first_server_of_nats_url_is_down(
    kit_settings: ServiceSettings,
) -> None:
    down = f"nats://127.0.0.1:{free_port()}"
    settings = kit_settings.model_copy(update={"nats_url": f"{down},{kit_settings.nats_url}"})
    connection = NatsConnection(settings, None)
    connection.start()
    try:
        await connection.wait_ready(timeout=20)
        assert connection.is_connected
    finally:
        await connection.close()


async def test_a_cluster_keeps_the_events_stream_on_its_three_nodes(
    cluster: EmbeddedNatsCluster, kit_settings: ServiceSettings
) -> None:
    settings = kit_settings.model_copy(
        update={"nats_url": cluster.url, "events_stream_replicas": 3}
    )
    connection = NatsConnection(settings, None)
    connection.start()
    try:
        await connection.wait_ready(timeout=30)
        info = await leader_elected(connection, settings.events_stream)
    finally:
        await connection.close()
    assert info.config.num_replicas == 3
    assert info.cluster is not None
    followers = {peer.name for peer in info.cluster.replicas or []}
    assert {info.cluster.leader, *followers} == {node.server_name for node in cluster.nodes}


async def test_a_process_moves_to_another_node_when_its_node_is_killed(
    cluster: EmbeddedNatsCluster, kit_settings: ServiceSettings
) -> None:
    settings = kit_settings.model_copy(
        update={"nats_url": cluster.url, "events_stream_replicas": 3}
    )
    connection = NatsConnection(settings, None)
    connection.start()
    try:
        await connection.wait_ready(timeout=30)
        js = connection.client.jetstream(timeout=2)
        await js.publish("events.kit.before", b"{}", headers={"Nats-Msg-Id": "before"})
        url = connection.client.connected_url
        assert url is not None
        own = next(node for node in cluster.nodes if node.port == url.port)
        with capture_logs() as logs:
            own.kill()
            # Reconnected by itself (same client: its subscriptions carry on), elsewhere.
            for _ in range(100):
                now = connection.client.connected_url
                if connection.is_connected and now is not None and now.port != own.port:
                    break
                await asyncio.sleep(0.1)
        assert connection.is_connected
        said = [(e["event"], e.get("server")) for e in logs if e["event"].startswith("NATS")]
        assert ("NATS disconnected; reconnecting", None) in said
        assert said[-1][0] == "NATS reconnected"
        assert said[-1][1] != f"127.0.0.1:{own.port}"
        info = await leader_elected(connection, settings.events_stream)
        assert info.cluster is not None
        assert info.cluster.leader != own.server_name
        await js.publish("events.kit.after", b"{}", headers={"Nats-Msg-Id": "after"})
        info = await js.stream_info(settings.events_stream)
        assert info.state.messages == 2
    finally:
        await connection.close()
