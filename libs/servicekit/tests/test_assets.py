"""The vendored front-end files are exactly the npm releases the manifest names, and every
service serves them (and the kit's own) at versioned addresses with integrity hashes."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import AsyncIterator

import httpx
import pytest
from servicekit.settings import ServiceSettings
from servicekit.web.app import create_service_app
from servicekit.web.errors import render_flat_error
from servicekit.web.pages.assets import IMMUTABLE, default_catalog
from servicekit.web.pages.vendoring import MANIFEST, RELEASES, VENDOR_DIR, folder_of

MANIFEST_DATA = json.loads(MANIFEST.read_text())
PACKAGES = MANIFEST_DATA["packages"]
FILES = [(package, entry) for package in PACKAGES for entry in package["files"]]


@pytest.mark.parametrize(("package", "entry"), FILES, ids=[e["path"] for _, e in FILES])
def test_every_vendored_file_has_the_hashes_the_manifest_records(
    package: dict[str, str], entry: dict[str, str]
) -> None:
    data = (VENDOR_DIR / entry["path"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    sri = "sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode()
    assert sri == entry["integrity"]


@pytest.mark.parametrize(("package", "entry"), FILES, ids=[e["path"] for _, e in FILES])
def test_every_vendored_file_sits_in_its_release_folder(
    package: dict[str, str], entry: dict[str, str]
) -> None:
    folder = f"{package['name'].replace('/', '+')}@{package['version']}"
    assert entry["path"].split("/")[0] == folder


def test_every_file_in_the_vendor_folder_is_in_the_manifest() -> None:
    on_disk = {
        path.relative_to(VENDOR_DIR).as_posix()
        for path in VENDOR_DIR.rglob("*")
        if path.is_file() and path != MANIFEST
    }
    assert on_disk == {entry["path"] for _, entry in FILES}


def test_the_manifest_holds_the_releases_the_vendoring_script_pins() -> None:
    pinned = {(r.name, r.version) for r in RELEASES}
    assert {(p["name"], p["version"]) for p in PACKAGES} == pinned
    assert {p.name for p in VENDOR_DIR.iterdir() if p.is_dir()} == {folder_of(r) for r in RELEASES}


def test_every_package_records_its_licence_and_ships_its_licence_file() -> None:
    for package in PACKAGES:
        assert package["license"], package["name"]
        assert any(e["source"].startswith("LICENSE") for e in package["files"]), package["name"]


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    # The assets and the docs need no database: no lifespan.
    app = create_service_app(
        ServiceSettings(), title="kit", description="d", version="1", render_error=render_flat_error
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver"
    ) as client:
        yield client


async def test_each_asset_is_served_for_a_year_immutable_with_the_bytes_it_is_listed_with(
    http: httpx.AsyncClient,
) -> None:
    catalog = default_catalog()
    for name in catalog.names():
        asset = catalog[name]
        response = await http.get(asset.url)
        assert response.status_code == 200, name
        assert response.headers["cache-control"] == IMMUTABLE
        digest = base64.b64encode(hashlib.sha384(response.content).digest()).decode()
        assert asset.integrity == f"sha384-{digest}", name


async def test_an_address_not_in_the_catalogue_is_404_even_when_the_file_exists(
    http: httpx.AsyncClient,
) -> None:
    for path in ("/_assets/vendor/manifest.json", "/_assets/kit/site.css", "/_assets/../app.py"):
        assert (await http.get(path)).status_code == 404, path


async def test_the_docs_pages_reference_only_catalogued_assets_with_their_integrity(
    http: httpx.AsyncClient,
) -> None:
    catalog = default_catalog()
    by_url = {catalog[n].url: catalog[n] for n in catalog.names()}
    for page in ("/docs", "/redoc"):
        html = (await http.get(page)).text
        references = re.findall(r'(?:src|href)="([^"]+)" integrity="([^"]+)"', html)
        assert references, page
        for url, integrity in references:
            assert by_url[url].integrity == integrity
        assert "<script>" not in html, "inline script"
