"""Errors of the standard `errors` array, each with an `extensions.code`.

Business problems of mutations are not errors: they go to the payload's `userErrors`.
"""

from __future__ import annotations

from graphql import GraphQLError

BAD_USER_INPUT = "BAD_USER_INPUT"
INTERNAL_SERVER_ERROR = "INTERNAL_SERVER_ERROR"
MAX_COST_EXCEEDED = "MAX_COST_EXCEEDED"


def bad_input(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": BAD_USER_INPUT})
