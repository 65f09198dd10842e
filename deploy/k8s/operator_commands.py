"""`make check-deploy`: the README's operator commands work against the deployment files.

The commands that create each Secret and the first API keys live only in the README, where
nothing would notice them going stale. This runs them without a cluster:

- every `kubectl ... create secret generic` command of the README's sh blocks goes through
  bash as written (`$NS` set to each overlay's namespace, `$(openssl ...)` and all), with
  kubectl's `--dry-run=client -o yaml` appended, and the Secrets it prints are compared with
  what each rendered overlay's pods read: every Secret a pod reads (envFrom, secretKeyRef,
  a volume) is created, in the pods' namespace, with no empty value; a `secretKeyRef`'s key is
  in it. A Secret a service reads whole (envFrom) holds only settings of that service (read
  from its Settings class, found through the container's image and console script) that its
  ConfigMap and `env` do not set, and at least every secret setting (production refuses to
  start without them) and every server URL (`shared_env_fields`) they leave out; its keys are
  the ones the README's table lists. Any other Secret holds exactly the keys pods name.
- every `api-keys create` command (`docker compose exec`, `kubectl exec`, `.venv/bin/`) names
  a compose service or Deployment that exists and runs the image of the console script
  named, a console script of the workspace, and arguments its own parser accepts.

    python deploy/k8s/operator_commands.py
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import yaml
from pydantic import SecretStr
from pydantic.fields import FieldInfo
from servicekit.cli import ServiceCLI
from servicekit.settings import ServiceSettings

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
OVERLAYS = ROOT / "deploy" / "k8s" / "overlays"
COMPOSE = ROOT / "docker-compose.yml"

Manifest = dict[str, Any]

SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
SECRET_COMMAND = re.compile(r"^kubectl\b.*\bcreate\s+secret\s+generic\b")
# `.venv/bin/<service> api-keys create --owner NAME ...` is a template, not a command.
PLACEHOLDER = re.compile(r"<\w+>")
KEYS_TABLE_HEADER = "| service | keys |"
POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
# What bash runs before each README command: kubectl only prints what it would create.
DRY_RUN_KUBECTL = 'kubectl() { command kubectl "$@" --dry-run=client -o yaml; }'


@dataclass(frozen=True)
class Problem:
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class SecretReads:
    """How one overlay's pods read one Secret."""

    # (image, keys the container's ConfigMaps and env set) per container reading it whole.
    whole: set[tuple[str, frozenset[str]]] = field(default_factory=set)
    keys: set[str] = field(default_factory=set)  # named by secretKeyRef
    mounted: bool = False  # a secret volume: every key is a file


def sh_commands(readme: str) -> list[str]:
    """The commands of the README's sh blocks, continuation lines joined as bash joins them."""
    commands: list[str] = []
    for block in SH_BLOCK.findall(readme):
        current = ""
        for line in block.splitlines():
            if not current and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.endswith("\\"):
                current += line[:-1]
                continue
            commands.append(current + line)
            current = ""
    return commands


def secret_commands(readme: str) -> list[str]:
    return [command for command in sh_commands(readme) if SECRET_COMMAND.match(command)]


def api_key_commands(readme: str) -> list[str]:
    return [
        command
        for command in sh_commands(readme)
        if "api-keys create" in command and not PLACEHOLDER.search(command)
    ]


def documented_secret_keys(readme: str) -> dict[str, set[str]] | None:
    """The README's table of each `<service>-secrets`' keys; None without the table."""
    _, found, rest = readme.partition(KEYS_TABLE_HEADER)
    if not found:
        return None
    table: dict[str, set[str]] = {}
    for line in rest.lstrip("\n").splitlines():
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) >= 2 and not set(cells[0]) <= {"-", ":"}:
            table[f"{cells[0]}-secrets"] = set(re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[1]))
    return table


def run_secret_command(command: str, namespace: str) -> Manifest | str:
    """The Secret the command creates in `namespace`, or why there is none."""
    script = f"NS={shlex.quote(namespace)}\n{DRY_RUN_KUBECTL}\n{command}\n"
    # An empty kubeconfig: whatever cluster the caller's points at is never asked anything.
    env = {**os.environ, "KUBECONFIG": os.devnull}
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        return f"fails: {result.stderr.strip() or f'exit status {result.returncode}'}"
    documents = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    if len(documents) != 1 or documents[0].get("kind") != "Secret":
        return "does not print exactly one Secret"
    secret: Manifest = documents[0]
    return secret


def render_overlays(overlays: Path = OVERLAYS) -> dict[str, list[Manifest]]:
    rendered: dict[str, list[Manifest]] = {}
    for overlay in sorted(path for path in overlays.iterdir() if path.is_dir()):
        output = subprocess.run(
            ["kubectl", "kustomize", str(overlay)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rendered[overlay.name] = [doc for doc in yaml.safe_load_all(output) if doc]
    return rendered


def pod_spec(manifest: Manifest) -> Mapping[str, Any] | None:
    kind = manifest.get("kind")
    spec: Mapping[str, Any] = manifest.get("spec", {})
    if kind in POD_TEMPLATE_KINDS:
        template_spec: Mapping[str, Any] = spec["template"]["spec"]
        return template_spec
    if kind == "CronJob":
        job_spec: Mapping[str, Any] = spec["jobTemplate"]["spec"]["template"]["spec"]
        return job_spec
    if kind == "Pod":
        return spec
    return None


def containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield from spec.get("initContainers", [])
    yield from spec.get("containers", [])


def secret_reads(manifests: Sequence[Manifest]) -> dict[str, SecretReads]:
    """Every Secret the pods of one rendered overlay read, and how."""
    config_maps = {
        doc["metadata"]["name"]: set(doc.get("data", {}))
        for doc in manifests
        if doc.get("kind") == "ConfigMap"
    }
    reads: dict[str, SecretReads] = {}
    for manifest in manifests:
        spec = pod_spec(manifest)
        if spec is None:
            continue
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                reads.setdefault(volume["secret"]["secretName"], SecretReads()).mounted = True
        for container in containers(spec):
            set_elsewhere = {variable["name"] for variable in container.get("env", [])}
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    set_elsewhere |= config_maps.get(source["configMapRef"]["name"], set())
            for source in container.get("envFrom", []):
                if "secretRef" in source:
                    reads.setdefault(source["secretRef"]["name"], SecretReads()).whole.add(
                        (container["image"], frozenset(set_elsewhere))
                    )
            for variable in container.get("env", []):
                ref = variable.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    reads.setdefault(ref["name"], SecretReads()).keys.add(ref["key"])
    return reads


def image_script(image: str) -> str:
    """The console script an image runs: deploy/Dockerfile names each image for its SERVICE."""
    return image.rsplit("/", 1)[-1].split("@")[0].split(":")[0]


@cache
def console_script_module(script: str) -> str | None:
    found = entry_points(group="console_scripts", name=script)
    return next(iter(found)).module if found else None


@cache
def settings_class(script: str) -> type[ServiceSettings] | None:
    module = console_script_module(script)
    if module is None:
        return None
    settings = getattr(
        importlib.import_module(f"{module.split('.')[0]}.settings"), "Settings", None
    )
    return (
        settings if isinstance(settings, type) and issubclass(settings, ServiceSettings) else None
    )


@cache
def script_parser(script: str) -> argparse.ArgumentParser | None:
    module = console_script_module(script)
    if module is None:
        return None
    clis = [v for v in vars(importlib.import_module(module)).values() if isinstance(v, ServiceCLI)]
    return clis[0].parser() if clis else None


def is_secret_setting(info: FieldInfo) -> bool:
    annotation = info.annotation
    return annotation is SecretStr or SecretStr in getattr(annotation, "__args__", ())


def check_service_secret(
    name: str, keys: set[str], image: str, set_elsewhere: frozenset[str]
) -> Iterator[str]:
    """What is wrong with a Secret that a service's container reads whole."""
    script = image_script(image)
    settings = settings_class(script)
    if settings is None:
        yield f"read whole by image {image}, whose {script!r} has no Settings to check against"
        return
    prefix = str(settings.model_config.get("env_prefix", "")).upper()
    fields = settings.model_fields
    readable = {prefix + setting.upper() for setting in fields}
    secret = {
        prefix + setting.upper() for setting, info in fields.items() if is_secret_setting(info)
    }
    servers = {prefix + setting.upper() for setting in settings.shared_env_fields}
    unread = sorted(key for key in keys if key.upper() not in readable)
    if unread:
        yield f"{', '.join(unread)}: no setting of {script} reads it"
    twice = sorted(keys & set_elsewhere)
    if twice:
        yield f"{', '.join(twice)}: also set by the container's ConfigMap or env"
    uppercase = {key.upper() for key in keys}
    missing = sorted((secret - uppercase) | (servers - uppercase - set_elsewhere))
    if missing:
        yield f"lacks {', '.join(missing)} (a secret or server setting of {script} set nowhere else)"


def check_api_key_command(
    command: str, overlays: Mapping[str, Sequence[Manifest]], compose: Mapping[str, Any]
) -> Iterator[str]:
    tokens = shlex.split(command, comments=True)
    if tokens[:3] == ["docker", "compose", "exec"]:
        rest = tokens[3:]
        while rest and rest[0].startswith("-"):
            rest = rest[1:]
        if len(rest) < 2:
            yield "names no compose service and command"
            return
        service, script, argv = rest[0], rest[1], rest[2:]
        found = compose.get("services", {}).get(service)
        if found is None:
            yield f"docker-compose.yml has no service {service!r}"
        elif image_script(str(found.get("image", ""))) != script:
            yield f"compose service {service!r} runs image {found.get('image')}, not {script}'s"
    elif tokens[:1] == ["kubectl"] and "exec" in tokens and "--" in tokens:
        separator = tokens.index("--")
        options, script, argv = tokens[:separator], tokens[separator + 1], tokens[separator + 2 :]
        namespace = options[options.index("-n") + 1] if "-n" in options else "default"
        targets = [t for t in options[options.index("exec") + 1 :] if not t.startswith("-")]
        target = next((t for t in targets if t.startswith("deploy/")), None)
        if target is None:
            yield "execs in no deploy/NAME"
            return
        yield from check_exec_target(target.removeprefix("deploy/"), namespace, script, overlays)
    elif tokens and tokens[0].startswith(".venv/bin/"):
        script, argv = tokens[0].removeprefix(".venv/bin/"), tokens[1:]
    else:
        yield "is neither `docker compose exec`, `kubectl exec` nor `.venv/bin/`: not checked"
        return
    parser = script_parser(script)
    if parser is None:
        yield f"{script!r} is not a service's console script"
        return
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            parsed = parser.parse_args(argv)
    except SystemExit:
        yield f"{script} refuses its arguments: {errors.getvalue().strip().splitlines()[-1]}"
        return
    if (parsed.command, getattr(parsed, "keys_command", None)) != ("api-keys", "create"):
        yield f"{script} {' '.join(argv)} is not `api-keys create`"


def check_exec_target(
    name: str, namespace: str, script: str, overlays: Mapping[str, Sequence[Manifest]]
) -> Iterator[str]:
    deployments = [
        doc
        for docs in overlays.values()
        for doc in docs
        if doc.get("kind") == "Deployment"
        and doc["metadata"]["name"] == name
        and doc["metadata"].get("namespace", "default") == namespace
    ]
    if not deployments:
        yield f"no overlay has a Deployment {name!r} in namespace {namespace!r}"
        return
    for deployment in deployments:
        # kubectl exec runs in the default container: the annotated one, else the first.
        template = deployment["spec"]["template"]
        chosen = (
            template.get("metadata", {})
            .get("annotations", {})
            .get("kubectl.kubernetes.io/default-container")
        )
        pods = template["spec"]["containers"]
        container = next((c for c in pods if c["name"] == chosen), pods[0])
        if image_script(container["image"]) != script:
            yield f"Deployment {name!r} runs image {container['image']}, not {script}'s"


def overlay_namespace(manifests: Sequence[Manifest]) -> str:
    namespaces = {
        doc["metadata"].get("namespace", "default")
        for doc in manifests
        if pod_spec(doc) is not None
    }
    return namespaces.pop() if len(namespaces) == 1 else "default"


def check_overlay_secrets(
    overlay: str, manifests: Sequence[Manifest], commands: Sequence[str]
) -> tuple[list[Problem], dict[str, Manifest]]:
    """The problems of one overlay, and the Secrets the commands create for it."""
    namespace = overlay_namespace(manifests)
    problems: list[Problem] = []
    created: dict[str, Manifest] = {}
    for command in commands:
        secret = run_secret_command(command, namespace)
        if isinstance(secret, str):
            problems.append(Problem(f"README, with NS={namespace}", f"`{command[:80]}` {secret}"))
            continue
        name = secret["metadata"]["name"]
        created[name] = secret
        if secret["metadata"].get("namespace") != namespace:
            problems.append(Problem(f"README, with NS={namespace}", f"{name} lands elsewhere"))
        for key, value in secret.get("data", {}).items():
            if not base64.b64decode(value):
                problems.append(Problem(f"README secret {name}", f"{key} is empty"))
    for name, reads in sorted(secret_reads(manifests).items()):
        where = f"overlay {overlay}: Secret {name}"
        if name not in created:
            problems.append(Problem(where, "pods read it and no README command creates it"))
            continue
        keys = set(created[name].get("data", {}))
        if reads.keys - keys:
            missing = ", ".join(sorted(reads.keys - keys))
            problems.append(Problem(where, f"lacks {missing} (named by a secretKeyRef)"))
        # Said once, though several images read it (scraper-manager's API and its worker's
        # image with Chromium).
        said: set[str] = set()
        for image, set_elsewhere in sorted(reads.whole):
            for message in check_service_secret(name, keys, image, set_elsewhere):
                if message not in said:
                    said.add(message)
                    problems.append(Problem(where, message))
        if not reads.whole and not reads.mounted and keys - reads.keys:
            unread = ", ".join(sorted(keys - reads.keys))
            problems.append(Problem(where, f"{unread}: no pod reads it"))
    return problems, created


def check(
    readme: str, overlays: Mapping[str, Sequence[Manifest]], compose: Mapping[str, Any]
) -> list[Problem]:
    commands = secret_commands(readme)
    problems: list[Problem] = []
    if not commands:
        problems.append(Problem("README", "no `kubectl ... create secret generic` command"))
    created: dict[str, Manifest] = {}
    read_whole: set[str] = set()
    for overlay, manifests in sorted(overlays.items()):
        found, secrets = check_overlay_secrets(overlay, manifests, commands)
        problems += found
        created.update(secrets)
        read_whole |= {name for name, reads in secret_reads(manifests).items() if reads.whole}
    read = {name for manifests in overlays.values() for name in secret_reads(manifests)}
    for name in sorted(set(created) - read):
        problems.append(Problem(f"README secret {name}", "no pod of any overlay reads it"))
    table = documented_secret_keys(readme)
    if table is None:
        problems.append(Problem("README", f"no table headed `{KEYS_TABLE_HEADER}`"))
        table = {}
    for name in sorted(read_whole & set(created)):
        keys = set(created[name].get("data", {}))
        if name not in table:
            problems.append(Problem("README table of keys", f"has no row for {name}"))
        elif table[name] != keys:
            differ = ", ".join(sorted(table[name] ^ keys))
            problems.append(Problem(f"README table of keys, {name}", f"differs on {differ}"))
    keys_commands = api_key_commands(readme)
    if not keys_commands:
        problems.append(Problem("README", "no `api-keys create` command"))
    for command in keys_commands:
        for message in check_api_key_command(command, overlays, compose):
            problems.append(Problem(f"README `{command[:80]}`", message))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    readme = args.readme.read_text()
    overlays = render_overlays()
    compose = yaml.safe_load(COMPOSE.read_text())
    problems = check(readme, overlays, compose)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(
        f"{args.readme.name}: {len(secret_commands(readme))} Secret commands match overlays "
        f"{', '.join(sorted(overlays))}; {len(api_key_commands(readme))} api-keys commands valid"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
