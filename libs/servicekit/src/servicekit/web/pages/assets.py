"""The front-end files a service serves under one prefix, each at a versioned address with
long cache headers and a Subresource-Integrity hash: the vendored npm releases (their
integrity read from `vendor/manifest.json`) and the kit's own files in `static/` (hashed when
loaded, their address carrying the hash)."""

from __future__ import annotations

import json
import mimetypes
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from servicekit.errors import NotFound
from servicekit.web.pages.vendoring import MANIFEST, VENDOR_DIR, sha256_hex, sri_sha384

ASSETS_PREFIX = "/_assets"
STATIC_DIR = Path(__file__).parent / "static"
# Every address names its content's version, so a browser may keep it for a year unasked.
IMMUTABLE = "public, max-age=31536000, immutable"


@dataclass(frozen=True)
class Asset:
    url: str
    integrity: str
    file: Path
    media_type: str


def _media_type(path: Path) -> str:
    guessed, _ = mimetypes.guess_type(path.name)
    if guessed in (None, "application/octet-stream"):
        return "text/plain; charset=utf-8"  # LICENSE, NOTICE
    return f"{guessed}; charset=utf-8" if guessed.startswith("text/") else guessed


class AssetCatalog:
    """Assets by name: `htmx.org/htmx.min.js` (npm package, file) or `kit/site.css`."""

    def __init__(self, prefix: str = ASSETS_PREFIX) -> None:
        self.prefix = prefix
        self._by_name: dict[str, Asset] = {}
        manifest = json.loads(MANIFEST.read_text())
        for package in manifest["packages"]:
            for entry in package["files"]:
                file = VENDOR_DIR / entry["path"]
                name = f"{package['name']}/{file.name}"
                url = f"{prefix}/vendor/{entry['path']}"
                self._by_name[name] = Asset(url, entry["integrity"], file, _media_type(file))
        for file in sorted(STATIC_DIR.iterdir()):
            data = file.read_bytes()
            url = f"{prefix}/kit/{sha256_hex(data)[:16]}/{file.name}"
            self._by_name[f"kit/{file.name}"] = Asset(
                url, sri_sha384(data), file, _media_type(file)
            )
        self._by_url = {asset.url: asset for asset in self._by_name.values()}

    def __getitem__(self, name: str) -> Asset:
        return self._by_name[name]

    def names(self) -> list[str]:
        return sorted(self._by_name)

    async def serve(self, request: Request) -> Response:
        # Only the catalogued addresses exist: no path ever reaches the file system.
        asset = self._by_url.get(request.url.path)
        if asset is None:
            raise NotFound("No such asset")
        return FileResponse(
            asset.file,
            media_type=asset.media_type,
            headers={"Cache-Control": IMMUTABLE, "X-Content-Type-Options": "nosniff"},
        )

    def route(self) -> Route:
        return Route(
            f"{self.prefix}/{{path:path}}", self.serve, methods=["GET", "HEAD"], name="assets"
        )


@cache
def default_catalog() -> AssetCatalog:
    """Read once per process: every app of the process serves the same files."""
    return AssetCatalog()
