"""Runs a README's `## Quickstart` exactly as a person pastes it, against the running stack.

The convention every quickstart follows (tests-e2e/README.md says the same):

- The fenced ```sh blocks of the section (up to the next `#`/`##` heading) run top to bottom
  in ONE `bash -euo pipefail`, cwd the repository root, so variables carry from block to
  block. Other fences (```json for a response, say) are shown, not run.
- The first block names the addresses with defaults a person gets from `make run`, and uses
  only these names; the harness sets them to the test stack's values:
      HUB=${HUB:-http://127.0.0.1:8001}
      SCRAPERS=${SCRAPERS:-http://127.0.0.1:8002}
      SHOP=${SHOP:-http://127.0.0.1:8003}
      RECEIVER_PORT=${RECEIVER_PORT:-9000}      # for deploy/local/receiver.py
      SITE=${SITE:-...}                          # a website for a scraper to crawl
      CONTENT_API_KEY=${COMMERCE_CONTENT_CONTENT_API_KEY:-dev-insecure-content-api-key}
- Console scripts are called as `.venv/bin/<service> ...` (what `make run` installed; no uv
  on the PATH needed). They find `make run`'s databases by their defaults; the harness sets
  `<PREFIX>DATABASE_URL` and `<PREFIX>NATS_URL` so they find the test stack's instead.
- Files a block writes go in a `mktemp -d` directory (the harness points TMPDIR at its own).
- To watch a webhook arrive, a block starts `python3 deploy/local/receiver.py --port
  "$RECEIVER_PORT" ... --count N --timeout S &` and later `wait`s for it; whatever a
  quickstart leaves running in the background is ended with its process group.
- Only what a person has: the harness runs without the virtualenv on PATH, so a bare
  `webhook-hub` fails here exactly as it would in a fresh terminal.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNNABLE_FENCES = {"sh", "bash"}
_HEADING = re.compile(r"^(#{1,2})\s+(.*?)\s*$")
_FENCE = re.compile(r"^\s*```+\s*([\w-]*)")


class NoQuickstart(AssertionError):
    """The README has no `## Quickstart` section, or one without a ```sh block."""


class QuickstartFailed(AssertionError):
    """A block exited non-zero; the message names it and holds the output."""


@dataclass(frozen=True)
class Block:
    number: int
    line: int  # where the fence opens, 1-based, for the failure message
    text: str


def quickstart_blocks(readme: Path) -> list[Block]:
    """The runnable blocks of the README's `## Quickstart` section, in order."""
    lines = readme.read_text().splitlines()
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if (m := _HEADING.match(line))
            and m[1] == "##"
            and m[2].lower().startswith("quickstart")
        ),
        None,
    )
    if start is None:
        raise NoQuickstart(f"{readme} has no Quickstart section (a `## Quickstart` heading)")
    blocks: list[Block] = []
    fence: tuple[int, str] | None = None
    body: list[str] = []
    for index in range(start + 1, len(lines)):
        line = lines[index]
        if fence is None and _HEADING.match(line):
            break  # the next section
        opening = _FENCE.match(line)
        if opening is None:
            if fence is not None:
                body.append(line)
            continue
        if fence is None:
            fence, body = (index + 1, opening[1].lower()), []
        else:
            if fence[1] in RUNNABLE_FENCES:
                blocks.append(Block(len(blocks) + 1, fence[0], "\n".join(body)))
            fence = None
    if not blocks:
        raise NoQuickstart(f"{readme}'s Quickstart section has no ```sh block")
    return blocks


def run_quickstart(readme: Path, env: dict[str, str], workdir: Path, timeout: float = 300) -> str:
    """Runs every block in one shell; returns the output, or raises QuickstartFailed with the
    block that failed (the last one started), its text and everything printed."""
    blocks = quickstart_blocks(readme)
    state = workdir / "block"
    script = ['trap \'echo "$__quickstart_block" > "$__QUICKSTART_STATE"\' EXIT']
    for block in blocks:
        script += [f"__quickstart_block={block.number}", block.text]
    script.append("__quickstart_block=0")
    output = workdir / "output.log"
    with output.open("wb") as sink:
        process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", "\n".join(script)],
            cwd=ROOT,
            env={**env, "__QUICKSTART_STATE": str(state), "TMPDIR": str(workdir)},
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code: int | None = process.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            # Receivers and anything else a quickstart started in the background.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    printed = output.read_text(errors="replace")
    if code == 0:
        return printed
    number = int(state.read_text().strip() or 0) if state.exists() else 0
    failed = next((b for b in blocks if b.number == number), None)
    where = f"block {failed.number} (line {failed.line})" if failed else "an unknown block"
    why = f"timed out after {timeout:.0f} s" if code is None else f"exited with {code}"
    shown = failed.text if failed else ""
    raise QuickstartFailed(
        f"{readme}: Quickstart {where} {why}\n--- block ---\n{shown}\n"
        f"--- output ---\n{printed[-6000:]}"
    )


def person_environment(extra: dict[str, str]) -> dict[str, str]:
    """A fresh terminal's environment: no virtualenv on PATH, no service settings, and
    then what the quickstart convention names."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(
        part for part in os.environ.get("PATH", "").split(os.pathsep) if part != venv_bin
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WEBHOOK_HUB_", "SCRAPER_MANAGER_", "COMMERCE_CONTENT_"))
        and key not in {"VIRTUAL_ENV", "DATABASE_URL", "NATS_URL", "SMTP_URL", "PYTHONPATH"}
    }
    return {**env, "PATH": path, **extra}
