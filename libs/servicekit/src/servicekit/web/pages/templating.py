"""The Jinja2 environment of a service's pages: its own templates first, then the kit's
(`kit/layout.html`, `kit/components.html`, the error and docs pages), autoescaped, with the
asset helpers that write `integrity=` from the catalogue."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlencode

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PackageLoader, StrictUndefined
from markupsafe import Markup
from starlette.requests import Request

from servicekit.web.pages.assets import AssetCatalog


def template_environment(catalog: AssetCatalog, template_dirs: Sequence[Path] = ()) -> Environment:
    loader = ChoiceLoader(
        [
            *(FileSystemLoader(directory) for directory in template_dirs),
            PackageLoader("servicekit.web.pages", "templates"),
        ]
    )
    env = Environment(
        loader=loader,
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )

    def script(name: str) -> Markup:
        asset = catalog[name]
        # defer: scripts run in order once the document is parsed, never blocking it.
        return Markup('<script src="{}" integrity="{}" defer></script>').format(
            asset.url, asset.integrity
        )

    def stylesheet(name: str) -> Markup:
        asset = catalog[name]
        return Markup('<link rel="stylesheet" href="{}" integrity="{}">').format(
            asset.url, asset.integrity
        )

    env.globals.update(asset=catalog.__getitem__, script=script, stylesheet=stylesheet)
    env.globals["with_query"] = with_query
    return env


def with_query(request: Request, **changes: str | None) -> str:
    """The current address with some query parameters replaced (None removes one): the links
    of filters and of keyset pagination keep every other filter as it was."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in changes]
    params += [(k, v) for k, v in changes.items() if v is not None]
    query = urlencode(params)
    return f"{request.url.path}?{query}" if query else request.url.path
