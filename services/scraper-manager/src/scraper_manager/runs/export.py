"""Cells of the exports. CSV: safe to open in a spreadsheet: OWASP's advice against CSV (formula)
injection, a text cell starting with `=`, `+`, `-`, `@`, tab or carriage return gets a leading
`'`, so a crawled `=HYPERLINK(...)` shows as text instead of running. Numbers are not text and
stay as they are; lists and objects are JSON (starting `[` or `{`). The header row is cells
like any other: its names are the client's selector names and the crawled items' keys."""

from __future__ import annotations

import json
from typing import IO, Any

from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return "'" + value if value.startswith(FORMULA_STARTS) else value


# Excel's limit of characters in a cell.
MAX_XLSX_TEXT = 32_767


def xlsx_value(value: object) -> Any:
    """A cell value: numbers and booleans as they are, nested values as JSON text, text without
    the control characters XML cannot carry, cut at Excel's cell limit."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False)
    return ILLEGAL_CHARACTERS_RE.sub("", value)[:MAX_XLSX_TEXT]


class XlsxRows:
    """A write-only workbook (openpyxl keeps each row in a temporary file, not in memory),
    saved into `target` at the end."""

    def __init__(self, columns: list[str], title: str = "results") -> None:
        self.book = Workbook(write_only=True)
        # openpyxl's write-only sheet: its class is private, and `create_sheet` is typed Any.
        self.sheet = self.book.create_sheet(title)
        self.columns = columns
        # Names are client text (selector names, crawled keys): typed as values are.
        self.sheet.append([self._cell(c) for c in columns])

    def append(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self.sheet.append([self._cell(record.get(c)) for c in self.columns])

    def _cell(self, value: object) -> Any:
        value = xlsx_value(value)
        if isinstance(value, str) and value.startswith("="):
            # Typed as text: crawled "=..." is shown, never evaluated as a formula.
            cell = WriteOnlyCell(self.sheet, value)
            cell.data_type = "s"
            return cell
        return value

    def save(self, target: IO[bytes]) -> None:
        self.book.save(target)
