"""ServiceMonitors checked against the prometheus-operator's own CRD schema.

kubernetes-validate knows the built-in kinds only. The ServiceMonitor CRD's openAPIV3Schema is
vendored as deploy/k8s/crds/servicemonitor-v1.schema.json (`vendor`), made strict the way
kubernetes-validate --strict is: an object with declared properties takes no other key (the
API server would prune it silently, so a typo'd field would do nothing). `make check-deploy`
renders each overlay, `extract`s its ServiceMonitors as JSON files and validates them with
check-jsonschema.

    python deploy/k8s/servicemonitors.py vendor monitoring.coreos.com_servicemonitors.yaml VERSION
    python deploy/k8s/servicemonitors.py extract RENDERED.yaml OUTDIR
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

SCHEMA = Path(__file__).resolve().parent / "crds" / "servicemonitor-v1.schema.json"


def strict(schema: Any) -> Any:
    """The schema with `additionalProperties: false` on every object that lists its properties
    and does not keep unknown fields on purpose."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in result
        and "additionalProperties" not in result
        and not result.get("x-kubernetes-preserve-unknown-fields")
    ):
        result["additionalProperties"] = False
    return result


def vendor(crd_file: Path, version: str) -> dict[str, Any]:
    crd = yaml.safe_load(crd_file.read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema: dict[str, Any] = strict(served["schema"]["openAPIV3Schema"])
    schema["properties"]["apiVersion"]["const"] = "monitoring.coreos.com/v1"
    schema["properties"]["kind"]["const"] = "ServiceMonitor"
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "spec"})
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$comment": (
            f"openAPIV3Schema of the ServiceMonitor CRD (v1) of prometheus-operator {version}, "
            "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml "
            "(Apache License 2.0), made strict by deploy/k8s/servicemonitors.py vendor."
        ),
        **schema,
    }


def extract(rendered: Path, out: Path) -> int:
    """Write each ServiceMonitor of a rendered overlay to OUT/<name>.json; how many."""
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for document in yaml.safe_load_all(rendered.read_text()):
        if isinstance(document, dict) and document.get("kind") == "ServiceMonitor":
            name = document["metadata"]["name"]
            (out / f"{name}.json").write_text(json.dumps(document, indent=2))
            count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    vendoring = commands.add_parser("vendor", help="write the schema from the CRD's YAML")
    vendoring.add_argument("crd", type=Path)
    vendoring.add_argument("version", help="the prometheus-operator release, e.g. v0.93.0")
    extracting = commands.add_parser("extract", help="a rendered overlay's ServiceMonitors")
    extracting.add_argument("rendered", type=Path)
    extracting.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "vendor":
        SCHEMA.parent.mkdir(exist_ok=True)
        SCHEMA.write_text(json.dumps(vendor(args.crd, args.version), indent=1) + "\n")
        print(f"wrote {SCHEMA}")
        return 0
    count = extract(args.rendered, args.out)
    if count:
        print(f"{count} ServiceMonitors to validate against {SCHEMA.name}")
    else:
        print("no ServiceMonitor in this overlay: none to validate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
