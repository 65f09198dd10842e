"""servicekit's non-web modules load without the web framework: workers, the CLI's admin
commands and the embedded servers need no FastAPI, and the kit's rules stay usable anywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import servicekit

# The FastAPI glue: the web package, auth's dependency and routes, the test tooling that
# serves apps, and the sign-in link command (it makes the pages' links, so it stands above
# both `cli` and `web`). Everything else must import without FastAPI or Starlette.
WEB_GLUE = ("servicekit.web", "servicekit.testing", "servicekit.auth.dependencies")
WEB_GLUE_MODULES = ("servicekit.auth.endpoints", "servicekit.link_command")
FRAMEWORKS = ("fastapi", "starlette")


def non_web_modules() -> list[str]:
    root = Path(servicekit.__file__).parent
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = ("servicekit", *path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue  # a script: importing it runs it
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if name.startswith(WEB_GLUE) or name in WEB_GLUE_MODULES:
            continue
        names.append(name)
    return names


# Imports the modules one by one and names the first that brought a framework in.
_PROBE = """
import importlib, json, sys
culprits = {}
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
    for framework in json.loads(sys.argv[2]):
        if framework in sys.modules and framework not in culprits:
            culprits[framework] = name
print(json.dumps(culprits))
"""


def test_the_walk_finds_the_non_web_modules() -> None:
    modules = non_web_modules()
    assert {"servicekit.db.engine", "servicekit.runtime", "servicekit.worker"} <= set(modules)
    assert not any(name.startswith("servicekit.web") for name in modules)


def test_no_non_web_module_imports_fastapi_or_starlette() -> None:
    modules = non_web_modules()
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(modules), json.dumps(FRAMEWORKS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout) == {}
