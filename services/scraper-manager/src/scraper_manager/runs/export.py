"""Cells of the CSV export, safe to open in a spreadsheet: OWASP's advice against CSV (formula)
injection, a text cell starting with `=`, `+`, `-`, `@`, tab or carriage return gets a leading
`'`, so a crawled `=HYPERLINK(...)` shows as text instead of running. Numbers are not text and
stay as they are; lists and objects are JSON (starting `[` or `{`)."""

from __future__ import annotations

import json

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return "'" + value if value.startswith(FORMULA_STARTS) else value
