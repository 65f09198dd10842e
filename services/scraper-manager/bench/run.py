"""`make bench` for scraper-manager: our crawl engine against Scrapy on a local site.

Serves a generated site of 2,000 linked pages on 127.0.0.1 and crawls it completely with our
engine and with Scrapy (installed for the benchmark only) under equal settings: the same
concurrency, no delay, no robots.txt, the same fields into JSON lines. Prints pages/s, CPU
seconds per 1,000 pages and peak memory for both, their ratio, whether both collected the
same set of URLs, and the measured request rate of a crawl with `rate_limit` 5.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from servicekit.embedded.network import free_port, wait_for_port

HERE = Path(__file__).resolve().parent


def crawl_ours(
    start: str, out: Path, concurrency: int, rate: float, max_pages: int
) -> dict[str, Any]:
    result = subprocess.run(
        [
            sys.executable,
            str(HERE / "ours.py"),
            start,
            str(out),
            str(concurrency),
            str(rate),
            str(max_pages),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def crawl_scrapy(start: str, out: Path, concurrency: int) -> dict[str, Any]:
    uv = os.environ.get("UV", "uv")
    result = subprocess.run(
        [
            uv,
            "run",
            "--with",
            "scrapy",
            "python",
            str(HERE / "scrapy_spider.py"),
            start,
            str(out),
            str(concurrency),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def urls(path: Path) -> set[str]:
    with path.open() as handle:
        return {json.loads(line)["url"] for line in handle if line.strip()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    port = free_port()
    cores = os.cpu_count() or 1
    site = subprocess.Popen(
        [sys.executable, str(HERE / "site.py"), str(port), str(args.pages)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: os.sched_setaffinity(0, {cores - 1}),
    )
    try:
        wait_for_port("127.0.0.1", port, 30)
        start = f"http://127.0.0.1:{port}/p/0"
        with tempfile.TemporaryDirectory(prefix="crawl-bench-") as tmp:
            ours_out, scrapy_out = Path(tmp) / "ours.jsonl", Path(tmp) / "scrapy.jsonl"
            ours = crawl_ours(start, ours_out, args.concurrency, 1e9, args.pages)
            theirs = crawl_scrapy(start, scrapy_out, args.concurrency)
            same = urls(ours_out) == urls(scrapy_out)
            limited = crawl_ours(start, Path(tmp) / "limited.jsonl", 4, 5, 26)
    finally:
        site.terminate()
        site.wait(10)
    rows = []
    for name, stats in (("ours", ours), ("scrapy", theirs)):
        rows.append(
            (
                name,
                stats["pages"],
                round(stats["pages"] / stats["seconds"]),
                round(stats["cpu_seconds"] / stats["pages"] * 1000, 2),
                round(stats["peak_rss_mb"]),
            )
        )
    print(
        f"\nscraper-manager crawl benchmark on {platform.machine()}, {cores} cores, "
        f"Python {platform.python_version()}, concurrency {args.concurrency}\n"
    )
    print(
        f"{'engine':8} | {'pages':>6} | {'pages/s':>8} | {'CPU s / 1000 pages':>18} | {'peak MB':>8}"
    )
    print("-" * 62)
    for row in rows:
        print(f"{row[0]:8} | {row[1]:>6} | {row[2]:>8} | {row[3]:>18} | {row[4]:>8}")
    ratio = (ours["pages"] / ours["seconds"]) / (theirs["pages"] / theirs["seconds"])
    print(f"\nours / scrapy pages/s: {ratio:.2f}x; same set of URLs: {same}")
    measured = (limited["pages"] - 1) / limited["seconds"]
    print(
        f"rate_limit 5: {limited['pages']} pages in {limited['seconds']:.2f} s = {measured:.2f} requests/s"
    )
    # Issue 16's figures: the run log's overhead and the XLSX export's memory.
    subprocess.run([sys.executable, str(Path(__file__).with_name("runlog_xlsx.py"))], check=True)
    # Issue 33's figures: incremental crawls and change detection.
    subprocess.run(
        [sys.executable, str(Path(__file__).with_name("changes_revalidation.py"))], check=True
    )
    # Issue 33's browser pages: pages/s and CPU per page against HTTP pages, same site.
    subprocess.run([sys.executable, str(Path(__file__).with_name("browser_pages.py"))], check=True)
    # Issue 33's figures: where the shared host budget lives, and 500 runs on one worker with
    # the 10 req/s host budget row.
    subprocess.run(
        [sys.executable, str(Path(__file__).with_name("host_budget_store.py"))], check=True
    )
    subprocess.run([sys.executable, str(Path(__file__).with_name("many_runs.py"))], check=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
