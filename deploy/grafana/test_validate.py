"""The dashboard validator of `make check-deploy`: what it accepts and what it reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from validate import (
    DASHBOARDS,
    check_dashboard,
    check_files,
    exported_metric_names,
    exposed_names,
    metric_names_in,
)


@pytest.fixture(scope="module")
def exported() -> set[str]:
    return exported_metric_names()


def dashboard(*exprs: str, **changes: Any) -> dict[str, Any]:
    panels = [
        {
            "id": n,
            "type": "timeseries",
            "title": f"panel {n}",
            "gridPos": {"h": 8, "w": 12, "x": 0, "y": 8 * n},
            "targets": [{"refId": "A", "expr": expr}],
        }
        for n, expr in enumerate(exprs, start=1)
    ]
    board = {
        "uid": "test",
        "title": "test",
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "panels": panels,
    }
    return {**board, **changes}


def test_the_exported_names_come_from_the_services_modules_and_the_http_middleware(
    exported: set[str],
) -> None:
    assert {
        "http_requests_total",
        "http_request_duration_seconds_bucket",
        "outbox_backlog",
        "webhook_delivery_attempts_total",
        "scraper_run_duration_seconds_bucket",
        "scraper_runs_finished_total",
        "mail_outbox_pending",
    } <= exported


def test_a_labelled_family_without_samples_yet_counts_as_exported() -> None:
    registry = CollectorRegistry()
    Histogram("run_seconds", "runs", ["status"], registry=registry)
    Counter("jobs", "jobs", ["outcome"], registry=registry)
    Gauge("depth", "depth", ["queue"], registry=registry)
    assert exposed_names(registry) >= {
        "run_seconds_bucket",
        "run_seconds_count",
        "run_seconds_sum",
        "jobs_total",
        "depth",
    }


def test_metric_names_are_read_from_the_parsed_query_with_grafana_variables_in_it() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, route) (rate(http_request_duration_seconds_bucket{job=~"$job"}'
        "[$__rate_interval]))) / on() group_left sum(outbox_backlog)"
    )
    assert metric_names_in(expr) == ["http_request_duration_seconds_bucket", "outbox_backlog"]


def test_a_query_that_is_not_promql_is_reported(exported: set[str]) -> None:
    problems = check_dashboard("d.json", dashboard("sum(rate(http_requests_total[5m])"), exported)
    assert len(problems) == 1
    assert "is not PromQL" in problems[0].message


def test_a_query_naming_a_metric_nobody_exports_is_reported(exported: set[str]) -> None:
    problems = check_dashboard("d.json", dashboard("rate(http_requests_totl[5m])"), exported)
    assert [p.message for p in problems] == [
        "'http_requests_totl' is not a metric the services export"
    ]


def test_a_dashboard_without_its_required_keys_is_reported(exported: set[str]) -> None:
    board = dashboard("outbox_backlog")
    del board["uid"]
    del board["panels"][0]["gridPos"]
    messages = [p.message for p in check_dashboard("d.json", board, exported)]
    assert messages == ["missing key 'uid'", "missing key 'gridPos'"]


def test_a_panel_without_a_query_is_reported(exported: set[str]) -> None:
    board = dashboard("outbox_backlog")
    board["panels"][0]["targets"] = []
    assert [p.message for p in check_dashboard("d.json", board, exported)] == ["no query"]


def test_a_file_that_is_not_json_and_a_uid_used_twice_are_reported(
    tmp_path: Path, exported: set[str]
) -> None:
    (tmp_path / "broken.json").write_text("{not json")
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(dashboard("outbox_backlog")))
    problems = check_files(sorted(tmp_path.glob("*.json")), exported)
    assert [(p.file, p.message.split(":")[0]) for p in problems] == [
        ("b.json", "uid 'test' as in a.json"),
        ("broken.json", "not JSON"),
    ]


def test_the_shipped_dashboards_name_only_exported_metrics(exported: set[str]) -> None:
    """Every shipped dashboard is sound and names only metrics the services register."""
    paths = sorted(DASHBOARDS.glob("*.json"))
    assert {p.name for p in paths} == {
        "webhook-hub.json",
        "scraper-manager.json",
        "commerce-content.json",
        "event-flow.json",
    }
    problems = check_files(paths, exported)
    assert problems == []
