"""Which interpreter `make bench` builds its virtual environment with (interpreter.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from interpreter import Build, candidates, choose, probe

PYENV = Build(
    "3.11",
    "/home/me/.pyenv/versions/3.11.7/bin/python3.11",
    "'--enable-shared'",
    "/home/me/.pyenv/versions/3.11.7",
)
DEBIAN = Build("3.11", "/usr/bin/python3.11", "'--enable-shared' '--prefix=/usr'", "/usr")
OFFICIAL = Build(
    "3.11", "/usr/local/bin/python3.11", "'--enable-optimizations' '--with-lto'", "/usr/local"
)
OTHER_VERSION = Build("3.12", "/usr/bin/python3.12", "", "/usr")


def test_an_optimised_build_is_kept_whatever_else_is_on_the_path() -> None:
    assert choose(OFFICIAL, [DEBIAN, PYENV]) == OFFICIAL


def test_a_plain_source_build_gives_way_to_a_distributions_build_of_its_version() -> None:
    assert choose(PYENV, [PYENV, DEBIAN]) == DEBIAN


def test_a_plain_source_build_gives_way_to_one_configured_with_optimisations() -> None:
    assert choose(PYENV, [OFFICIAL, DEBIAN]) == OFFICIAL


def test_a_plain_source_build_is_kept_when_only_other_versions_are_optimised() -> None:
    assert choose(PYENV, [OTHER_VERSION]) == PYENV


def test_a_plain_source_build_is_kept_when_it_is_the_only_one() -> None:
    assert choose(PYENV, []) == PYENV


def test_this_interpreter_describes_its_own_build() -> None:
    build = probe(sys.executable)
    assert build is not None
    assert build.version == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert build.prefix == sys.base_prefix


def test_a_program_that_is_not_python_is_no_build() -> None:
    assert probe("/bin/false") is None


def test_candidates_are_found_in_the_paths_order(tmp_path: Path) -> None:
    first, second, empty = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for directory in (first, second, empty):
        directory.mkdir()
    for program in (first / "python3.11", second / "python3", second / "python3.11"):
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    (first / "python3").write_text("not executable")
    path = os.pathsep.join(str(d) for d in (first, second, empty))
    assert candidates("3.11", path) == [
        str(first / "python3.11"),
        str(second / "python3"),
        str(second / "python3.11"),
    ]
