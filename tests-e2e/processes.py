"""The stack's processes, found from outside as an operator would (by command line)."""

from __future__ import annotations

import psutil


def workers(stack_pid: int, service: str) -> list[psutil.Process]:
    found = []
    for child in psutil.Process(stack_pid).children(recursive=True):
        try:
            command = child.cmdline()
        except psutil.NoSuchProcess:
            continue
        if len(command) >= 2 and command[-2].endswith(service) and command[-1] == "worker":
            found.append(child)
    return found
