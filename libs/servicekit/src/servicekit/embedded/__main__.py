"""`python -m servicekit.embedded -- COMMAND...`: run COMMAND with throwaway PostgreSQL and NATS.

`make test` uses it so every pytest run of the suite shares one pair of servers through
`DATABASE_URL`/`NATS_URL`, instead of each starting its own. Already-set URLs are kept.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.postgres import EmbeddedPostgres


def main(argv: list[str]) -> int:
    command = argv[1:] if argv and argv[0] == "--" else argv
    if not command:
        print("usage: python -m servicekit.embedded -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="servicekit-") as workdir:
        postgres = nats = None
        try:
            if "DATABASE_URL" not in env:
                postgres = EmbeddedPostgres(Path(workdir) / "postgres", durable=False)
                postgres.start()
                env["DATABASE_URL"] = postgres.url
            if "NATS_URL" not in env:
                nats = EmbeddedNats(Path(workdir) / "nats")
                nats.start()
                env["NATS_URL"] = nats.url
            return subprocess.call(command, env=env)
        finally:
            if nats is not None:
                nats.stop()
            if postgres is not None:
                postgres.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
