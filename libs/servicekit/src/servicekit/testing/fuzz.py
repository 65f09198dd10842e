"""schemathesis over a service's OpenAPI document, with text no database takes in its alphabet.

schemathesis draws NUL characters only now and then and never lone surrogates (it cannot send
them in a URL). The hooks below put them, often, into the strings it generates: NUL anywhere
(path, query, body), lone surrogates in JSON bodies (sent as `\\ud800` escapes), a NUL key
in JSON objects, and integers past PostgreSQL's ranges. The only check is the one that matters for robustness: no 5xx.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err

# `make test` runs a few examples per operation; `make fuzz` sets more.
EXAMPLES_ENV = "FUZZ_EXAMPLES"
DEFAULT_EXAMPLES = 3
NUL = "\x00"
LONE_SURROGATE = "\ud800"


# Set (to anything) for new inputs each run; unset, every run draws the same (CI stays stable).
RANDOM_ENV = "FUZZ_RANDOM"


def examples_per_operation() -> int:
    return int(os.environ.get(EXAMPLES_ENV, DEFAULT_EXAMPLES))


def fuzz_randomly() -> bool:
    return bool(os.environ.get(RANDOM_ENV))


def poisoned(value: Any, *, bad_text: list[str], big_numbers: bool) -> st.SearchStrategy[Any]:
    """`value` as generated, or with `bad_text` put into its strings, or (`big_numbers`) its
    integers past the database's ranges."""
    if isinstance(value, str) and bad_text:
        return st.one_of(
            st.just(value),
            st.sampled_from(bad_text).map(lambda c: value + c),
            st.sampled_from(bad_text).map(lambda c: c + value),
        )
    if isinstance(value, int) and not isinstance(value, bool) and big_numbers:
        return st.sampled_from([value, 2**31, 2**63, 10**20, -(2**63) - 1])
    if isinstance(value, dict):
        fields = {
            key: poisoned(item, bad_text=bad_text, big_numbers=big_numbers)
            for key, item in value.items()
        }
        base = st.fixed_dictionaries(fields)
        if NUL not in bad_text or LONE_SURROGATE not in bad_text:
            return base
        return st.one_of(base, base.map(lambda d: {**d, "key" + NUL: "value"}))
    if isinstance(value, list):
        items = (poisoned(item, bad_text=bad_text, big_numbers=big_numbers) for item in value)
        return st.tuples(*items).map(list)
    return st.just(value)


def sometimes_poisoned(value: Any, *, surrogates: bool) -> st.SearchStrategy[Any]:
    """Half the cases as generated, so they reach the service's own validation; a quarter with
    bad text, a quarter with big numbers (one kind at a time, so neither hides the other)."""
    bad_text = [NUL, LONE_SURROGATE] if surrogates else [NUL]
    return st.integers(0, 3).flatmap(
        lambda n: (
            st.just(value)
            if n < 2
            else poisoned(value, bad_text=bad_text if n == 2 else [], big_numbers=n == 3)
        )
    )


def _poison_schema(schema: Any) -> None:
    def flatmap_body(context: Any, body: Any) -> st.SearchStrategy[Any]:
        return sometimes_poisoned(body, surrogates=True)

    def flatmap_query(context: Any, query: Any) -> st.SearchStrategy[Any]:
        return sometimes_poisoned(query, surrogates=False)

    def flatmap_path_parameters(context: Any, parameters: Any) -> st.SearchStrategy[Any]:
        return sometimes_poisoned(parameters, surrogates=False)

    for hook in (flatmap_body, flatmap_query, flatmap_path_parameters):
        schema.hook(hook)


def fuzz_openapi(
    base_url: str,
    headers: dict[str, str],
    *,
    examples: int | None = None,
    derandomize: bool | None = None,
) -> tuple[int, list[str]]:
    """Every operation of the service at `base_url`, `examples` cases each: how many
    operations were tried, and a finding per operation that answered a 5xx (or could not be
    described)."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    schema.config.generation.update(allow_x00=True)
    _poison_schema(schema)

    def check(case: Any) -> None:
        case.call_and_validate(
            base_url=base_url, headers=headers, checks=[not_a_server_error], timeout=30
        )

    return exercise_operations(
        schema,
        check,
        examples=examples or examples_per_operation(),
        derandomize=not fuzz_randomly() if derandomize is None else derandomize,
    )


def exercise_operations(
    schema: Any, check: Callable[[Any], None], *, examples: int, derandomize: bool
) -> tuple[int, list[str]]:
    """`check` on `examples` cases of every operation of a schemathesis schema (OpenAPI or
    GraphQL): how many operations were tried, and a finding per operation that failed (every
    operation is tried, all findings reported) or could not be described."""
    findings: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            findings.append(f"an operation the schema cannot describe: {result.err()}")
            continue
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=examples,
            deadline=None,
            derandomize=derandomize,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case: Any) -> None:
            check(case)

        try:
            exercise()
        except (Exception, BaseExceptionGroup) as exc:
            findings.append(f"{operation.label}: {exc}")
    return operations, findings
