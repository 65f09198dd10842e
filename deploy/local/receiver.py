"""A webhook receiver to watch deliveries arrive: `python3 deploy/local/receiver.py --port 9000`.

Prints each POST it gets (webhook id, event type, body) and answers 204; HEAD and GET (the
hub's reachability probe) get 200. Given the subscription's secret (`--secret`, or
`--secret-file`, read at each delivery so it may be written after the receiver started), it
verifies the Standard Webhooks signature and answers 400 to one that does not verify.
`--count N` exits 0 once N deliveries arrived (verified, when a secret is known) and
`--timeout S` exits 1 if they did not within S seconds, so a script can wait for them.
Only the standard library: it runs with any Python 3.11.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TOLERANCE_SECONDS = 300  # the Standard Webhooks specification's replay window


def verify(secret: str, headers: dict[str, str], body: bytes, now: float) -> bool:
    """Standard Webhooks: base64 HMAC-SHA256 of `id.timestamp.body`, with the base64 secret
    (optionally `whsec_`-prefixed) as key; any `v1,` entry of the header may match."""
    msg_id = headers.get("webhook-id", "")
    timestamp = headers.get("webhook-timestamp", "")
    if not msg_id or not timestamp.isdigit() or abs(now - int(timestamp)) > TOLERANCE_SECONDS:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    for entry in headers.get("webhook-signature", "").split():
        version, _, signature = entry.partition(",")
        if version == "v1" and hmac.compare_digest(signature, expected):
            return True
    return False


class Receiver:
    def __init__(self, secret: str | None, secret_file: Path | None, count: int | None) -> None:
        self.secret = secret
        self.secret_file = secret_file
        self.count = count
        self.accepted = 0
        self.done = threading.Event()
        self.lock = threading.Lock()

    def current_secret(self) -> str | None:
        if self.secret is not None:
            return self.secret
        if self.secret_file is not None and self.secret_file.exists():
            return self.secret_file.read_text().strip() or None
        return None

    def receive(self, headers: dict[str, str], body: bytes) -> int:
        secret = self.current_secret()
        if secret is None:
            verdict = "not verified (no secret given)"
        elif verify(secret, headers, body, time.time()):
            verdict = "signature verified"
        else:
            print(f"webhook {headers.get('webhook-id', '?')}: signature INVALID", flush=True)
            return 400
        try:
            event_type = json.loads(body).get("type", "?")
        except (ValueError, AttributeError):
            event_type = "?"
        print(
            f"webhook {headers.get('webhook-id', '?')} {event_type}: {verdict}\n"
            f"  {body.decode(errors='replace')}",
            flush=True,
        )
        with self.lock:
            self.accepted += 1
            if self.count is not None and self.accepted >= self.count:
                self.done.set()
        return 204


def handler_for(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {key.lower(): value for key, value in self.headers.items()}
            self.send_response(receiver.receive(headers, body))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD

        def log_message(self, format: str, *args: object) -> None:
            """Each delivery is printed once, by `receive`."""

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--secret", help="the subscription's signing secret")
    parser.add_argument("--secret-file", type=Path, help="a file holding the secret")
    parser.add_argument("--count", type=int, help="exit 0 after this many deliveries")
    parser.add_argument("--timeout", type=float, help="with --count: exit 1 after this long")
    args = parser.parse_args(argv)
    receiver = Receiver(args.secret, args.secret_file, args.count)
    server = ThreadingHTTPServer((args.host, args.port), handler_for(receiver))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"receiving webhooks on http://{args.host}:{args.port}/", flush=True)
    try:
        arrived = receiver.done.wait(args.timeout)
    except KeyboardInterrupt:
        arrived = True
    finally:
        server.shutdown()
    if not arrived:
        print(f"{receiver.accepted} of {args.count} deliveries in {args.timeout} s", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
