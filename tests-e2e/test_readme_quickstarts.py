"""Each service README's `## Quickstart`, run exactly as written against the running stack,
so the documentation cannot rot. The convention the blocks follow is in quickstarts.py's
docstring and tests-e2e/README.md."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Stack
from quickstarts import (
    ROOT,
    NoQuickstart,
    QuickstartFailed,
    person_environment,
    quickstart_blocks,
    run_quickstart,
)
from servicekit.embedded.network import free_port

SERVICES = ("webhook-hub", "scraper-manager", "commerce-content")
# The first test to ask for the stack pays for starting it (two minutes on a busy 2-core box).
pytestmark = pytest.mark.timeout(600)

# Only to prove the harness: the real quickstarts are the services' READMEs' own.
SAMPLE_QUICKSTART = """
## Quickstart

```sh
HUB=${HUB:-http://127.0.0.1:8001}
RECEIVER_PORT=${RECEIVER_PORT:-9000}
WORK=$(mktemp -d)
```

An admin key of the consumer `acme`:

```sh
KEY=$(.venv/bin/webhook-hub api-keys create --owner acme --level admin | tail -n 1)
```

A receiver that prints what it gets and exits after two deliveries:

```sh
python3 deploy/local/receiver.py --port "$RECEIVER_PORT" --secret-file "$WORK/secret" \\
    --count 2 --timeout 60 &
RECEIVER=$!
until curl -fs "http://127.0.0.1:$RECEIVER_PORT/" >/dev/null; do sleep 0.2; done
```

```sh
curl -fsS -X POST "$HUB/webhooks/subscriptions" -H "Authorization: Bearer $KEY" \\
    -H 'Content-Type: application/json' \\
    -d "{\\"endpoint_url\\": \\"http://127.0.0.1:$RECEIVER_PORT/hook\\", \\"events\\": [\\"order.paid\\"]}" \\
    > "$WORK/subscription.json"
field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }
field "$WORK/subscription.json" secret > "$WORK/secret"
SUB=$(field "$WORK/subscription.json" id)
curl -fsS -X POST "$HUB/webhooks/subscriptions/$SUB/test" -H "Authorization: Bearer $KEY"
wait "$RECEIVER"
```

```json
{"note": "shown, not run"}
```

```sh
curl -fsS "$HUB/webhooks/subscriptions/$SUB/deliveries" -H "Authorization: Bearer $KEY"
```

## Next section

```sh
exit 3
```
"""


def quickstart_environment(stack: Stack, website: str, receiver_port: int) -> dict[str, str]:
    """The convention's names, set to the test stack's addresses and databases."""
    extra = {
        "HUB": stack.hub.url,
        "SCRAPERS": stack.scrapers.url,
        "SHOP": stack.shop.url,
        "RECEIVER_PORT": str(receiver_port),
        "SITE": website,
        "COMMERCE_CONTENT_CONTENT_API_KEY": "e2e-content-api-key-0123456789",
    }
    for info in stack.services.values():
        prefix = info.name.upper().replace("-", "_") + "_"
        extra[f"{prefix}DATABASE_URL"] = info.database_url
        extra[f"{prefix}NATS_URL"] = stack.nats_url
    return person_environment(extra)


def readme_with_sample_quickstart(tmp_path: Path) -> Path:
    """A copy of webhook-hub's README whose Quickstart is the sample above."""
    original = (ROOT / "services" / "webhook-hub" / "README.md").read_text()
    kept = original.split("\n## Quickstart", 1)[0]
    copy = tmp_path / "README.md"
    copy.write_text(kept.rstrip() + "\n" + SAMPLE_QUICKSTART)
    return copy


@pytest.mark.parametrize("service", SERVICES)
def test_the_readme_quickstart_runs_top_to_bottom_against_the_stack(
    service: str, stack: Stack, shop_website: str, tmp_path: Path
) -> None:
    readme = ROOT / "services" / service / "README.md"
    env = quickstart_environment(stack, shop_website, free_port())

    output = run_quickstart(readme, env, tmp_path)

    assert output.strip(), "a quickstart that prints nothing shows nothing"


def test_the_harness_runs_a_sample_quickstart_and_a_webhook_arrives_verified(
    stack: Stack, shop_website: str, tmp_path: Path
) -> None:
    readme = readme_with_sample_quickstart(tmp_path)
    env = quickstart_environment(stack, shop_website, free_port())

    output = run_quickstart(readme, env, tmp_path)

    assert "webhook.test: signature verified" in output
    assert '"status"' in output  # the delivery log of the last block


def test_the_harness_names_the_failing_block_and_shows_its_output(
    stack: Stack, shop_website: str, tmp_path: Path
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "## Quickstart\n\n```sh\nHUB=${HUB:-http://127.0.0.1:8001}\necho first\n```\n\n"
        '```sh\necho second\ncurl -fsS "$HUB/webhooks/no-such-thing"\necho never\n```\n'
    )
    env = quickstart_environment(stack, shop_website, free_port())

    with pytest.raises(QuickstartFailed) as failed:
        run_quickstart(readme, env, tmp_path)

    message = str(failed.value)
    assert "Quickstart block 2 (line 8) exited with 22" in message
    assert 'curl -fsS "$HUB/webhooks/no-such-thing"' in message
    assert "first\nsecond\n" in message
    assert "never\n" not in message.split("--- output ---")[1]


def test_a_console_script_without_its_path_fails_as_in_a_fresh_terminal(
    stack: Stack, shop_website: str, tmp_path: Path
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("## Quickstart\n\n```sh\nwebhook-hub --help\n```\n")
    env = quickstart_environment(stack, shop_website, free_port())

    with pytest.raises(QuickstartFailed, match="exited with 127"):
        run_quickstart(readme, env, tmp_path)


def test_only_the_sh_blocks_of_the_quickstart_section_are_run(tmp_path: Path) -> None:
    readme = readme_with_sample_quickstart(tmp_path)

    blocks = quickstart_blocks(readme)

    assert len(blocks) == 5
    assert blocks[0].text.startswith("HUB=${HUB:-http://127.0.0.1:8001}")
    assert all(
        "exit 3" not in block.text and "shown, not run" not in block.text for block in blocks
    )


def test_a_readme_without_a_quickstart_section_is_refused(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# svc\n\n## Running\n\n```sh\nsvc serve\n```\n")

    with pytest.raises(NoQuickstart, match="no Quickstart section"):
        quickstart_blocks(readme)


def test_a_quickstart_section_without_a_sh_block_is_refused(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("## Quickstart\n\nRun it.\n\n```json\n{}\n```\n\n## Next\n")

    with pytest.raises(NoQuickstart, match="no ```sh block"):
        quickstart_blocks(readme)
