"""A DNS resolver a test scripts: each lookup answers the next address of a list (the last one
repeats), so a test can make a name change its answer between a check and a connect. An
answer of None is a name that does not resolve, as the system resolver reports it."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field

from aiohttp.abc import AbstractResolver, ResolveResult


@dataclass
class ScriptedResolver(AbstractResolver):
    answers: list[str | None]
    lookups: list[str] = field(default_factory=list)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        address = self.answers[min(len(self.lookups), len(self.answers) - 1)]
        self.lookups.append(host)
        if address is None:
            raise OSError(socket.EAI_NONAME, f"{host}: Name or service not known")
        version = ipaddress.ip_address(address).version
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET if version == 4 else socket.AF_INET6,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self) -> None:
        return None
