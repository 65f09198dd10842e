"""Pure rules of the crawler: link matching in linear time with capped links, and crawled text
made storable."""

from __future__ import annotations

import time

import pytest
from parsel import Selector
from scraper_manager.crawler.engine import next_hop_headers, retry_delay
from scraper_manager.crawler.extraction import extract_links
from scraper_manager.crawler.text import clean_text, clean_value, decode, text_encoding

BASE = "http://site.example/"


def page_with(*hrefs: str) -> Selector:
    return Selector(text="".join(f'<a href="{h}">x</a>' for h in hrefs))


def test_the_reported_pathological_pattern_matches_in_linear_time() -> None:
    page = page_with("/" + "a" * 29 + "!", "/" + "a" * 2000 + "!", "/aaa")
    started = time.perf_counter()
    links = extract_links(page, BASE, "re:(a+)+$")
    # Backtracking would take 2^29 steps on the first link (minutes): any bound far below
    # that shows linear matching without being a speed target on a loaded machine.
    assert time.perf_counter() - started < 2.0
    assert links == ["http://site.example/aaa"]


def test_links_longer_than_the_cap_are_not_followed() -> None:
    page = page_with("/short", "/" + "x" * 3000)
    assert extract_links(page, BASE, None, max_length=2048) == ["http://site.example/short"]


def test_only_the_first_links_of_a_page_are_looked_at() -> None:
    page = page_with(*(f"/p{n}" for n in range(10)))
    assert len(extract_links(page, BASE, None, max_links=3)) == 3


@pytest.mark.parametrize(
    ("raw", "clean"),
    [("a\x00b", "ab"), ("a\ud800b", "a\ufffdb"), ("\udfff", "\ufffd"), ("plain é", "plain é")],
)
def test_text_is_stored_without_nul_and_lone_surrogates(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean


def test_item_values_are_cleaned_all_the_way_down() -> None:
    item = {"a\x00": ["x\x00", {"y": "\ud800"}], "n": 1, "none": None}
    assert clean_value(item) == {"a": ["x", {"y": "\ufffd"}], "n": 1, "none": None}


@pytest.mark.parametrize("charset", ["unicode_escape", "raw-unicode-escape", "rot13", "nope", None])
def test_a_charset_that_is_no_plain_text_encoding_is_read_as_utf8(charset: str | None) -> None:
    assert text_encoding(charset) == "utf-8"


def test_a_declared_text_encoding_is_used() -> None:
    assert decode("é".encode("latin-1"), "latin-1") == "é"
    assert decode(b"a\\x00b", "unicode_escape") == "a\\x00b"


@pytest.mark.parametrize("header", ["²", "1²", "٣", "abc", "-1", ""])
def test_a_retry_after_that_is_no_ascii_number_falls_back_to_the_backoff(header: str) -> None:
    assert retry_delay(2, header) == 1.0


def test_a_retry_after_in_seconds_is_honoured_up_to_a_minute() -> None:
    assert retry_delay(1, " 7 ") == 7.0
    assert retry_delay(1, "3600") == 60.0


OWN = {"User-Agent": "crawler"}
GIVEN = {**OWN, "Authorization": "Bearer s", "Cookie": "a=1", "X-Api-Key": "k"}


@pytest.mark.parametrize(
    "target",
    ["http://site.example/b", "http://site.example:80/b", "http://SITE.example/b", "/relative"],
)
def test_a_redirect_within_the_origin_keeps_every_header(target: str) -> None:
    target = target if target.startswith("http") else BASE + target.lstrip("/")
    assert next_hop_headers(GIVEN, OWN, "http://site.example/a", target) == GIVEN


@pytest.mark.parametrize(
    "target",
    [
        "http://other.example/",  # host
        "http://site.example:8080/",  # port
        "https://site.example/",  # scheme, even an upgrade
        "http://sub.site.example/",
        "http://site.example:99999/",  # no valid origin at all
    ],
)
def test_a_redirect_to_another_origin_keeps_only_the_crawlers_own_headers(target: str) -> None:
    assert next_hop_headers(GIVEN, OWN, "http://site.example/a", target) == OWN


def test_credentials_never_cross_an_origin_even_as_the_crawlers_own() -> None:
    own = {"User-Agent": "crawler", "Cookie": "x=1"}
    assert next_hop_headers(own, own, "http://a.example/", "http://b.example/") == OWN


def test_headers_dropped_on_the_way_out_stay_dropped_on_the_way_back() -> None:
    away = next_hop_headers(GIVEN, OWN, "http://site.example/a", "http://other.example/")
    assert next_hop_headers(away, OWN, "http://other.example/", "http://site.example/b") == OWN
