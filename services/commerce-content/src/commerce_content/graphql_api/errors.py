"""Errors of the standard `errors` array, each with an `extensions.code`.

Business problems of mutations are not errors: they go to the payload's `userErrors`.
"""

from __future__ import annotations

from graphql import GraphQLError

BAD_USER_INPUT = "BAD_USER_INPUT"
INTERNAL_SERVER_ERROR = "INTERNAL_SERVER_ERROR"
MAX_COST_EXCEEDED = "MAX_COST_EXCEEDED"

# PostgreSQL text cannot hold NUL, and UTF-8 cannot encode a lone surrogate (JSON's "\ud800"
# decodes to one): such strings would fail in the database, so they are refused on the way in.
UNSTORABLE_MESSAGE = "Strings may not contain NUL characters or lone UTF-16 surrogates"


class InvalidInput(ValueError):
    """A value an input rule of the schema refuses (a scalar's parsing, a string's characters).

    graphql-core wraps what a scalar raises into errors of its own, dropping their
    extensions; this class marks the cause, so the answer says `BAD_USER_INPUT` instead of
    being masked as an unexpected failure."""


def bad_input(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": BAD_USER_INPUT})


def caused_by_invalid_input(error: BaseException | None) -> bool:
    seen = 0
    while error is not None and seen < 10:  # graphql-core nests its wrappers a few deep
        if isinstance(error, InvalidInput):
            return True
        error = error.original_error if isinstance(error, GraphQLError) else error.__cause__
        seen += 1
    return False
