"""The same crawl with Scrapy: same concurrency, no delay, no robots, same fields as JSON lines.
Run with Scrapy installed for the benchmark only (`uv run --with scrapy`)."""

from __future__ import annotations

import json
import resource
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.crawler import CrawlerProcess


class BenchSpider(scrapy.Spider):  # type: ignore[misc]
    name = "bench"

    def __init__(self, start: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [start]
        self.host = urlsplit(start).hostname

    def parse(self, response: Any) -> Any:
        yield {
            "url": response.url,
            "status": response.status,
            "title": response.css("title::text").get(),
            "description": response.css('meta[name="description"]::attr(content)').get(),
        }
        for href in response.css("a::attr(href)").getall():
            if urlsplit(response.urljoin(href)).hostname == self.host:
                yield response.follow(href, callback=self.parse)


def main() -> None:
    start, out_path, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    process = CrawlerProcess(
        settings={
            "CONCURRENT_REQUESTS": concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency,
            "DOWNLOAD_DELAY": 0,
            "ROBOTSTXT_OBEY": False,
            "AUTOTHROTTLE_ENABLED": False,
            "LOG_LEVEL": "ERROR",
            "TELNETCONSOLE_ENABLED": False,
            "FEEDS": {out_path: {"format": "jsonlines", "overwrite": True}},
        }
    )
    process.crawl(BenchSpider, start=start)
    started = time.perf_counter()
    process.start()
    elapsed = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(out_path) as handle:
        pages = sum(1 for _ in handle)
    print(
        json.dumps(
            {
                "pages": pages,
                "seconds": elapsed,
                "cpu_seconds": usage.ru_utime + usage.ru_stime,
                "peak_rss_mb": usage.ru_maxrss / 1024,
            }
        )
    )


if __name__ == "__main__":
    main()
