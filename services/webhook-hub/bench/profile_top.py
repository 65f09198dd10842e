"""The top lines of py-spy's collapsed stacks (`--format raw`): where a worker's samples are
spent, by function itself (self) and with what it calls (inclusive)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path


def main() -> None:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for path in sys.argv[1:]:
        for line in Path(path).read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack:
                continue
            count = int(count_text)
            frames = stack.split(";")
            total += count
            own[frames[-1]] += count
            for frame in set(frames):
                inclusive[frame] += count
    print(f"{total} samples")
    for title, counter in (("self", own), ("inclusive", inclusive)):
        print(f"\n-- top by {title} --")
        for frame, count in counter.most_common(25):
            print(f"{100 * count / max(total, 1):5.1f}%  {frame}")


if __name__ == "__main__":
    main()
