"""`make check-deploy`: the Grafana dashboards under deploy/grafana/dashboards/ are sound.

Every file parses as JSON and has the keys Grafana's import needs; every panel has a query;
every query is PromQL that parses (Grafana's `$variables` put in first) and names only
metrics the services export. The exported names are not a list kept by hand: every module
of servicekit and of the three services is imported, so each module-level metric lands in
prometheus_client's registry, the HTTP metrics are made in a registry of their own as
`create_service_app` makes them, and the names are read from what `/metrics` would print.
A metric that a branch has not added yet is therefore reported until it lands.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import promql_parser
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

DASHBOARDS = Path(__file__).resolve().parent / "dashboards"
PACKAGES = ("servicekit", "webhook_hub", "scraper_manager", "commerce_content")
# Test helpers are not what a service process runs.
SKIPPED_MODULES = re.compile(r"(^|\.)(testing|__main__)(\.|$)")
REQUIRED_DASHBOARD_KEYS = ("title", "uid", "panels", "schemaVersion", "time")
REQUIRED_PANEL_KEYS = ("id", "type", "title", "gridPos")
# Panels that hold no query of their own.
QUERYLESS_PANELS = {"row", "text"}
# What each kind of metric family is exposed as.
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
    "stateset": ("",),
    "gauge": ("",),
    "unknown": ("",),
}
# `$__rate_interval`, `${job}`, `$job`: a duration is valid wherever Grafana puts them.
GRAFANA_VARIABLE = re.compile(r"\$(\{[^}]+\}|\w+)")


@dataclass(frozen=True)
class Problem:
    file: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.where}: {self.message}"


def import_service_modules(packages: Iterable[str] = PACKAGES) -> None:
    """Import every module of the packages, so every module-level metric is registered."""
    for name in packages:
        package = importlib.import_module(name)
        for module in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if not SKIPPED_MODULES.search(module.name):
                importlib.import_module(module.name)


def exposed_names(registry: CollectorRegistry) -> set[str]:
    """The sample names a scrape of `registry` can hold, labelled families with no sample
    yet included (their `# TYPE` line is printed all the same)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def exported_metric_names() -> set[str]:
    from servicekit.web.middleware import HttpMetrics

    import_service_modules()
    http = CollectorRegistry()
    HttpMetrics(http)  # what every API process serves at /metrics
    return exposed_names(REGISTRY) | exposed_names(http)


def metric_names_in(expr: str) -> list[str]:
    """The metric names a PromQL expression selects; ValueError when it does not parse."""
    parsed = promql_parser.parse(GRAFANA_VARIABLE.sub("5m", expr))
    names: list[str] = []

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name is None:
                raise ValueError("a selector without a metric name")
            names.append(node.name)

    promql_parser.walk(parsed, pre_visit=visit)
    return names


def panels_of(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def check_dashboard(file: str, dashboard: Any, exported: set[str]) -> list[Problem]:
    if not isinstance(dashboard, dict):
        return [Problem(file, "dashboard", "not a JSON object")]
    problems = [
        Problem(file, "dashboard", f"missing key {key!r}")
        for key in REQUIRED_DASHBOARD_KEYS
        if key not in dashboard
    ]
    if not isinstance(dashboard.get("panels", []), list):
        return [*problems, Problem(file, "dashboard", "'panels' is not a list")]
    ids: set[int] = set()
    for panel in panels_of(dashboard):
        where = f"panel {panel.get('title', panel.get('id', '?'))!r}"
        problems += [
            Problem(file, where, f"missing key {key!r}")
            for key in REQUIRED_PANEL_KEYS
            if key not in panel
        ]
        if panel.get("id") in ids:
            problems.append(Problem(file, where, f"id {panel.get('id')} used twice"))
        ids.add(panel.get("id", -1))
        if panel.get("type") in QUERYLESS_PANELS:
            continue
        targets = [t for t in panel.get("targets", []) if t.get("expr")]
        if not targets:
            problems.append(Problem(file, where, "no query"))
        named: set[str] = set()
        for target in targets:
            try:
                named.update(metric_names_in(target["expr"]))
            except ValueError as exc:
                problems.append(Problem(file, where, f"{target['expr']!r} is not PromQL: {exc}"))
        problems += [
            Problem(file, where, f"{name!r} is not a metric the services export")
            for name in sorted(named - exported)
        ]
    return problems


def check_files(paths: Iterable[Path], exported: set[str]) -> list[Problem]:
    problems: list[Problem] = []
    uids: dict[str, str] = {}
    for path in paths:
        try:
            dashboard = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            problems.append(Problem(path.name, "file", f"not JSON: {exc}"))
            continue
        problems += check_dashboard(path.name, dashboard, exported)
        uid = dashboard.get("uid") if isinstance(dashboard, dict) else None
        if isinstance(uid, str):
            if uid in uids:
                problems.append(Problem(path.name, "dashboard", f"uid {uid!r} as in {uids[uid]}"))
            uids[uid] = path.name
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="default: every dashboard")
    args = parser.parse_args(argv)
    paths: list[Path] = args.paths or sorted(DASHBOARDS.glob("*.json"))
    if not paths:
        print(f"no dashboards under {DASHBOARDS}", file=sys.stderr)
        return 1
    problems = check_files(paths, exported_metric_names())
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(f"{len(paths)} dashboards valid; every query names a metric the services export")
    return 0


if __name__ == "__main__":
    sys.exit(main())
