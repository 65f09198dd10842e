"""`serve --reuse-port`: several API processes listen on one port, the kernel spreading
connections between them."""

from __future__ import annotations

import socket

import pytest
from servicekit.cli import reuse_port_socket
from servicekit.embedded.network import free_port


def test_two_listeners_bind_one_port_with_reuse_port() -> None:
    port = free_port()
    first = reuse_port_socket("127.0.0.1", port)
    second = reuse_port_socket("127.0.0.1", port)
    try:
        assert first.getsockname() == second.getsockname() == ("127.0.0.1", port)
    finally:
        first.close()
        second.close()


def test_a_plain_listener_cannot_share_the_port() -> None:
    port = free_port()
    first = reuse_port_socket("127.0.0.1", port)
    plain = socket.socket()
    try:
        with pytest.raises(OSError, match="in use"):
            plain.bind(("127.0.0.1", port))
    finally:
        first.close()
        plain.close()
