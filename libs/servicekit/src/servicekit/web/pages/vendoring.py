"""Vendors the front-end assets from their npm releases: `python -m servicekit.web.pages.vendoring`.

Each package is fetched with `npm pack NAME@VERSION` (the registry's tarball, its integrity
checked by npm), and only the files the pages load are kept, with the package's licence files,
under `vendor/NAME@VERSION/`. `vendor/manifest.json` records, per package, its name, version,
licence, the tarball's integrity and, per file, its path, its source in the tarball, its
sha256 and its Subresource-Integrity hash (sha384). Templates take their `integrity=` from the
manifest; a test checks every file against it. To upgrade, change a version below and run this.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VENDOR_DIR = Path(__file__).parent / "vendor"
MANIFEST = VENDOR_DIR / "manifest.json"


@dataclass(frozen=True)
class NpmRelease:
    name: str
    version: str
    files: tuple[str, ...]  # paths inside the tarball's `package/`
    purpose: str
    # For a package whose package.json names none (its LICENSE file says which).
    license: str | None = None
    # Other releases (NAME@VERSION) whose LICENSE files ship with this one, as
    # LICENSE.NAME: for a tarball with none of its own, and for code its bundle includes.
    licences_from: tuple[str, ...] = ()


RELEASES = (
    NpmRelease("htmx.org", "2.0.11", ("dist/htmx.min.js",), "partial page updates"),
    NpmRelease("htmx-ext-sse", "2.2.4", ("dist/sse.min.js",), "htmx's Server-Sent Events", "0BSD"),
    NpmRelease("uplot", "1.6.32", ("dist/uPlot.iife.min.js", "dist/uPlot.min.css"), "charts"),
    NpmRelease("swagger-ui-dist", "5.35.0", ("swagger-ui-bundle.js", "swagger-ui.css"), "/docs"),
    NpmRelease("redoc", "2.5.4", ("bundles/redoc.standalone.js",), "/redoc"),
    NpmRelease("graphiql", "3.9.0", ("graphiql.min.js", "graphiql.min.css"), "GraphiQL"),
    # 3.2.6 is the release built for graphiql 3.9.0's @graphiql/react 0.29 (its peer range). Its
    # tarball has no LICENSE: its monorepo's (graphiql's) and the bundled graphiql-explorer's.
    NpmRelease(
        "@graphiql/plugin-explorer",
        "3.2.6",
        ("dist/index.umd.js", "dist/style.css"),
        "GraphiQL's Explorer",
        licences_from=("graphiql@3.9.0", "graphiql-explorer@0.9.0"),
    ),
    NpmRelease("react", "18.3.1", ("umd/react.production.min.js",), "GraphiQL's React"),
    NpmRelease("react-dom", "18.3.1", ("umd/react-dom.production.min.js",), "GraphiQL's React"),
    NpmRelease("axe-core", "4.14.1", ("axe.min.js",), "accessibility checks in browser tests"),
)
_LICENCE_NAMES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE", "NOTICE")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sri_sha384(data: bytes) -> str:
    return "sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode()


def folder_of(release: NpmRelease) -> str:
    return f"{release.name.replace('/', '+')}@{release.version}"


def _pack(spec: str, workdir: Path) -> tuple[Path, str]:
    out = subprocess.run(
        ["npm", "pack", spec, "--json", "--pack-destination", str(workdir)],
        check=True,
        capture_output=True,
        text=True,
    )
    described = json.loads(out.stdout)[0]
    return workdir / described["filename"], described["integrity"]


def _vendor(release: NpmRelease, workdir: Path) -> dict[str, Any]:
    tarball, tarball_integrity = _pack(f"{release.name}@{release.version}", workdir)
    target = VENDOR_DIR / folder_of(release)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with tarfile.open(tarball) as archive:
        members = {m.name.removeprefix("package/"): m for m in archive.getmembers() if m.isfile()}
        wanted = [*release.files, *(n for n in _LICENCE_NAMES if n in members)]
        package_json = json.loads(_read(archive, members["package.json"]))
        files = []
        for source in wanted:
            data = _read(archive, members[source])
            path = target / Path(source).name
            path.write_bytes(data)
            files.append(
                {
                    "path": path.relative_to(VENDOR_DIR).as_posix(),
                    "source": source,
                    "sha256": sha256_hex(data),
                    "integrity": sri_sha384(data),
                }
            )
    for spec in release.licences_from:
        files.append(_licence_from(spec, target, workdir))
    if package_json["version"] != release.version:
        raise RuntimeError(f"{release.name}: npm gave {package_json['version']}")
    return {
        "name": release.name,
        "version": release.version,
        "license": release.license or package_json["license"],
        "purpose": release.purpose,
        "tarball_integrity": tarball_integrity,
        "files": files,
    }


def _licence_from(spec: str, target: Path, workdir: Path) -> dict[str, str]:
    tarball, _ = _pack(spec, workdir)
    with tarfile.open(tarball) as archive:
        data = _read(archive, archive.getmember("package/LICENSE"))
    path = target / f"LICENSE.{spec.rpartition('@')[0].replace('/', '+')}"
    path.write_bytes(data)
    return {
        "path": path.relative_to(VENDOR_DIR).as_posix(),
        "source": "LICENSE",
        "from": spec,
        "sha256": sha256_hex(data),
        "integrity": sri_sha384(data),
    }


def _read(archive: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = archive.extractfile(member)
    if handle is None:
        raise RuntimeError(f"{member.name} is not a file")
    return handle.read()


def vendor_all() -> dict[str, Any]:
    VENDOR_DIR.mkdir(parents=True, exist_ok=True)
    for old in VENDOR_DIR.iterdir():
        if old.is_dir():
            shutil.rmtree(old)
    with tempfile.TemporaryDirectory(prefix="vendor-") as workdir:
        packages = [_vendor(release, Path(workdir)) for release in RELEASES]
    manifest = {"packages": packages}
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main() -> None:
    argparse.ArgumentParser(description=__doc__).parse_args()
    for package in vendor_all()["packages"]:
        size = sum((VENDOR_DIR / f["path"]).stat().st_size for f in package["files"])
        print(f"{package['name']}@{package['version']} ({package['license']}): {size} bytes")


if __name__ == "__main__":
    main()
