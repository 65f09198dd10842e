"""Asking the running service's /graphql through a real GraphQL client (gql over HTTP)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import httpx
from gql import Client, GraphQLRequest
from gql.transport.exceptions import TransportQueryError
from gql.transport.httpx import HTTPXAsyncTransport


@dataclass(frozen=True)
class Answer:
    data: Any
    errors: list[dict[str, Any]]
    extensions: dict[str, Any] | None
    headers: httpx.Headers = field(default_factory=httpx.Headers)

    @property
    def codes(self) -> list[str]:
        return [str((e.get("extensions") or {}).get("code")) for e in self.errors]


async def ask(
    url: str,
    query: str,
    variables: dict[str, Any] | None = None,
    *,
    headers: dict[str, str] | None = None,
) -> Answer:
    transport = HTTPXAsyncTransport(url=url, headers=headers or {}, timeout=30)
    async with Client(transport=transport, fetch_schema_from_transport=False) as session:
        request = GraphQLRequest(query, variable_values=variables)
        try:
            result = await session.execute(request, get_execution_result=True)
        except TransportQueryError as exc:
            return Answer(exc.data, list(exc.errors or []), exc.extensions, _headers(transport))
        return Answer(result.data, [], result.extensions, _headers(transport))


def _headers(transport: HTTPXAsyncTransport) -> httpx.Headers:
    return transport.response_headers or httpx.Headers()


def global_id(type_name: str, key: object) -> str:
    """How clients see ids; built here from the published format, not the service's code."""
    return base64.urlsafe_b64encode(f"{type_name}:{key}".encode()).decode().rstrip("=")


PRODUCT_PAGE = """
query Page($filter: ProductFilter, $page: PaginationInput) {
  products(filter: $filter, page: $page) {
    edges { cursor node { id name } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  }
}
"""
