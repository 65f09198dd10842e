"""One delivery store: `delivery_engine/store.py` is the only module of the package that
writes `deliveries` or `delivery_attempts` (migrations, outside the package, aside), and the
engine depends on it, never on `deliveries/` (the API's and the portal's reads)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import webhook_hub

PACKAGE = Path(webhook_hub.__file__).parent
STORE = PACKAGE / "delivery_engine" / "store.py"
# SQL that writes either table, whatever the case and spacing (`COPY {table}` is the store's
# binary COPY, which names its table in a parameter).
WRITES = re.compile(
    r"\b(?:insert\s+into|update|delete\s+from|copy|truncate(?:\s+table)?)\s+"
    r"(?:deliveries|delivery_attempts|\{table\})(?!\w)",
    re.IGNORECASE,
)
# A row made through the ORM: a `Delivery` built to be added (models.py defines the class, and
# builds a transient `DeliveryAttempt` view of a row's first attempt).
ORM_ROWS = re.compile(r"\b(?:Delivery|DeliveryAttempt)\(")


def sources() -> dict[str, str]:
    return {
        str(path.relative_to(PACKAGE)): path.read_text() for path in sorted(PACKAGE.rglob("*.py"))
    }


def imported_modules(source: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_scan_finds_the_stores_own_writes_of_both_tables() -> None:
    written = {match.group(0).split()[-1].lower() for match in WRITES.finditer(STORE.read_text())}
    assert {"deliveries", "delivery_attempts", "{table}"} <= written


def test_no_module_but_the_store_writes_deliveries_or_delivery_attempts() -> None:
    writers = {
        name: [match.group(0) for match in WRITES.finditer(source)]
        for name, source in sources().items()
        if name != "delivery_engine/store.py"
    }
    assert {name: found for name, found in writers.items() if found} == {}


def test_no_module_but_the_store_and_the_models_builds_delivery_rows() -> None:
    builders = [
        name
        for name, source in sources().items()
        if name not in ("delivery_engine/store.py", "models.py") and ORM_ROWS.search(source)
    ]
    assert builders == []


def test_the_delivery_engine_never_imports_the_apis_deliveries_or_dispatch() -> None:
    arrows = {
        name: sorted(
            module
            for module in imported_modules(source)
            if module.startswith(("webhook_hub.deliveries", "webhook_hub.dispatch"))
        )
        for name, source in sources().items()
        if name.startswith("delivery_engine/")
    }
    assert {name: found for name, found in arrows.items() if found} == {}


def test_dispatch_and_the_apis_deliveries_reach_deliveries_through_the_store() -> None:
    users = {
        name
        for name, source in sources().items()
        if "webhook_hub.delivery_engine.store" in imported_modules(source)
    }
    assert {
        "dispatch/loop.py",
        "deliveries/service.py",
        "subscriptions/service.py",
        "delivery_engine/engine.py",
        "worker.py",
    } <= users
