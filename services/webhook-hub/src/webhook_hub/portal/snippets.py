"""Receiver help: verification code for Python, Node and Go with each ecosystem's Standard
Webhooks library, filled with the endpoint's address and id. The secret is written in only
right after it was revealed (creation, rotation); otherwise the code reads an environment
variable, so a page that is shown again never carries it."""

from __future__ import annotations

import json
from dataclasses import dataclass

SECRET_ENV = "WEBHOOK_SECRET"  # noqa: S105 (the variable's name, not a secret)


@dataclass(frozen=True)
class Snippet:
    language: str
    install: str
    code: str


def _python(header: str, secret: str | None) -> str:
    source = json.dumps(secret) if secret else f'os.environ["{SECRET_ENV}"]'
    os_import = "" if secret else "import os\n\n"
    return f'''{os_import}from standardwebhooks.webhooks import Webhook, WebhookVerificationError

# {header}
webhook = Webhook({source})


def verify(body: bytes, headers: dict[str, str]) -> dict:
    """The event, when webhook-hub signed it for this endpoint; otherwise raises
    WebhookVerificationError (answer 400). `body`: the raw request body, unparsed."""
    return webhook.verify(body, headers)
'''


def _node(header: str, secret: str | None) -> str:
    source = json.dumps(secret) if secret else f"process.env.{SECRET_ENV}"
    return f"""import {{ Webhook }} from "standardwebhooks";

// {header}
const webhook = new Webhook({source});

// The event, when webhook-hub signed it for this endpoint; otherwise throws
// WebhookVerificationError (answer 400). `body`: the raw request body (string or
// Buffer), before any JSON parsing; `headers`: the request's headers.
export function verify(body, headers) {{
  return webhook.verify(body, headers);
}}
"""


def _go(header: str, secret: str | None) -> str:
    source = json.dumps(secret) if secret else f'os.Getenv("{SECRET_ENV}")'
    # Go refuses an unused import: "os" only when the secret comes from the environment.
    os_import = "" if secret else '\n\t"os"'
    return f"""package receiver

import (
	"io"
	"net/http"{os_import}

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// {header}
func Handle(w http.ResponseWriter, r *http.Request) {{
	wh, err := standardwebhooks.NewWebhook({source})
	if err != nil {{
		http.Error(w, "bad secret", http.StatusInternalServerError)
		return
	}}
	body, err := io.ReadAll(r.Body) // the raw body: verify before parsing JSON
	if err != nil {{
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}}
	if err := wh.Verify(body, r.Header); err != nil {{
		http.Error(w, "invalid signature", http.StatusBadRequest)
		return
	}}
	w.WriteHeader(http.StatusNoContent) // then handle the event in body
}}
"""


def receiver_snippets(
    endpoint_url: str, subscription_id: str, secret: str | None = None
) -> list[Snippet]:
    header = f"Endpoint {subscription_id} at {endpoint_url}"
    return [
        Snippet("Python", "pip install standardwebhooks", _python(header, secret)),
        Snippet("Node", "npm install standardwebhooks", _node(header, secret)),
        Snippet(
            "Go",
            "go get github.com/standard-webhooks/standard-webhooks/libraries/go",
            _go(header, secret),
        ),
    ]
