"""The interpreter `make bench` builds its virtual environment (.venv-bench) with: this one,
unless it is a plain source build and PATH holds an optimised build of the same version.
Prints its path. (`make` itself uses the interpreter it finds: a developer's own build is
theirs to choose; a benchmark's figures should be the engine's, not the build's.)

One machine can hold both. Distributions' packages, python.org's installers, Homebrew, the
official container images and uv's own builds are compiled with profile-guided and link-time
optimisation; pyenv and asdf compile on the machine with a plain `./configure` unless told
otherwise. A webhook-hub worker spends about three quarters of its CPU in the interpreter
itself (perf, during `make bench`'s drain), and on this machine pyenv's 3.11 took 1.5 times
as long as Debian's on pure Python. Told by the build's configuration, not by timing it:
a virtual machine's core can run at half its pace for seconds, so timings would choose
differently from one day to the next.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PROBE_TIMEOUT_SECONDS = 30
# What a build says of itself: version, path, configure arguments and prefix.
PROBE = (
    "import json, sys, sysconfig; print(json.dumps({"
    "'version': '%d.%d' % sys.version_info[:2], 'executable': sys.executable, "
    "'config_args': sysconfig.get_config_var('CONFIG_ARGS') or '', "
    "'prefix': sys.base_prefix}))"
)
# Where distributions install their packages' interpreter (built with their own PGO and LTO
# rules, which `CONFIG_ARGS` does not show).
DISTRIBUTION_PREFIXES = ("/usr",)


@dataclass(frozen=True)
class Build:
    version: str
    executable: str
    config_args: str
    prefix: str

    @property
    def optimised(self) -> bool:
        """Built with profile-guided or link-time optimisation, as far as can be told."""
        return (
            "--enable-optimizations" in self.config_args
            or "--with-lto" in self.config_args
            or self.prefix in DISTRIBUTION_PREFIXES
        )


def choose(current: Build, others: list[Build]) -> Build:
    """`current` unless it is a plain build and one of `others` (in PATH's order) is an
    optimised build of the same version."""
    if current.optimised:
        return current
    for other in others:
        if other.version == current.version and other.optimised:
            return other
    return current


def candidates(version: str, path: str) -> list[str]:
    """`python3` and `python<version>` in each directory of `path`, in its order."""
    found = []
    for directory in path.split(os.pathsep):
        for name in ("python3", f"python{version}"):
            candidate = Path(directory or ".") / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                found.append(str(candidate))
    return found


def probe(executable: str) -> Build | None:
    """What `executable` says of its build; None when it does not run the probe."""
    try:
        done = subprocess.run(
            [executable, "-I", "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            check=True,
        )
        return Build(**json.loads(done.stdout))
    except (OSError, subprocess.SubprocessError, ValueError, TypeError):
        return None


def main() -> int:
    current = probe(sys.executable)
    if current is None or current.optimised:
        print(sys.executable)
        return 0
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    others = [found for c in candidates(version, os.environ.get("PATH", "")) if (found := probe(c))]
    print(choose(current, others).executable)
    return 0


if __name__ == "__main__":
    sys.exit(main())
