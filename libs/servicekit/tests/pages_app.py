"""A small app with pages, built the way a service builds its own: the sample page has a form,
a table with keyset pagination, an empty state, an htmx action and a live (SSE) region."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from servicekit.auth.api_keys import AccessLevel
from servicekit.errors import NotFound
from servicekit.web.app import create_service_app
from servicekit.web.errors import render_flat_error
from servicekit.web.pages import (
    LoginRequired,
    NavItem,
    OptionalPageSessionDep,
    PageEvent,
    Pages,
    PagesDep,
    PageSessionDep,
    PageSettings,
    event_stream,
)
from servicekit.web_session import SessionDep
from sqlalchemy import Column, DateTime
from sqlmodel import Field, SQLModel

PREFIX = "/pages"
PAGE_SIZE = 5


class KitPageSession(SQLModel, table=True):
    """The sample app's page sessions, as a service declares its own (migration 0003)."""

    __tablename__ = "kit_page_sessions"

    id_hash: str = Field(primary_key=True, max_length=64)
    service: str = Field(max_length=64)
    owner: str = Field(max_length=200)
    level: str = Field(max_length=16)
    api_key_id: uuid.UUID | None = None
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    last_seen_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    expires_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


@dataclass
class Thing:
    id: int
    name: str
    owner: str
    active: bool = True


def build_pages_app(settings: PageSettings, clock: Callable[[], float] = time.time) -> FastAPI:
    app = create_service_app(
        settings,
        title="Kit sample",
        description="servicekit pages test app",
        version="0.0.1",
        render_error=render_flat_error,
    )
    pages = Pages(
        app,
        settings,
        prefix=PREFIX,
        site_name="Kit sample",
        login_path=f"{PREFIX}/login",
        sessions=KitPageSession,
        logout_path=f"{PREFIX}/logout",
        nav=[NavItem("Things", f"{PREFIX}/things"), NavItem("API", "/docs")],
        template_dirs=[Path(__file__).parent / "templates"],
        clock=clock,
    )
    things: list[Thing] = []
    app.state.things = things
    router = pages.router()

    @router.get("/login")
    async def login_form(
        request: Request, pages: PagesDep, session: OptionalPageSessionDep, next: str = ""
    ) -> HTMLResponse:
        return pages.render(request, "login.html", {"title": "Sign in", "next": next})

    @router.post("/login")
    async def login(
        pages: PagesDep,
        db: SessionDep,
        owner: Annotated[str, Form()],
        level: Annotated[AccessLevel, Form()],
        next: Annotated[str, Form()] = "",
    ) -> Response:
        response = RedirectResponse(pages.safe_next(next), status_code=303)
        await pages.start_session(db, response, owner, level, api_key_id=None)
        return response

    @router.post("/key-login")
    async def key_login(
        request: Request,
        pages: PagesDep,
        db: SessionDep,
        api_key: Annotated[str, Form()] = "",
    ) -> Response:
        principal = await pages.key_sign_in(request, db, api_key)
        if principal is None:
            raise LoginRequired(f"{PREFIX}/things")
        response = RedirectResponse(f"{PREFIX}/things", status_code=303)
        await pages.start_session(
            db, response, principal.owner, principal.level, api_key_id=principal.key_id
        )
        return response

    @router.post("/logout")
    async def logout(request: Request, pages: PagesDep, db: SessionDep) -> Response:
        response = RedirectResponse(f"{PREFIX}/login", status_code=303)
        await pages.end_session(request, db, response)
        return response

    @router.get("/things")
    async def list_things(
        request: Request, pages: PagesDep, session: PageSessionDep, cursor: int = 0
    ) -> HTMLResponse:
        mine = [t for t in things if t.owner == session.owner]
        shown = [t for t in mine if t.id > cursor][:PAGE_SIZE]
        more = len([t for t in mine if t.id > cursor]) > PAGE_SIZE
        context: dict[str, Any] = {
            "title": "Things",
            "things": shown,
            "next_cursor": str(shown[-1].id) if more else None,
            "errors": {},
            "name": "",
        }
        return pages.render(request, "things.html", context)

    @router.post("/things")
    async def create_thing(
        request: Request,
        pages: PagesDep,
        session: PageSessionDep,
        name: Annotated[str, Form()] = "",
    ) -> Response:
        if not name.strip():
            mine = [t for t in things if t.owner == session.owner][:PAGE_SIZE]
            context: dict[str, Any] = {
                "title": "Things",
                "things": mine,
                "next_cursor": None,
                "errors": {"name": "Give the thing a name."},
                "name": name,
            }
            return pages.render(request, "things.html", context, status_code=422)
        things.append(Thing(len(things) + 1, name.strip(), session.owner))
        response = RedirectResponse(f"{PREFIX}/things", status_code=303)
        pages.flash(response, f"Created “{name.strip()}”.")
        return response

    @router.post("/things/{thing_id}/toggle")
    async def toggle_thing(
        request: Request, pages: PagesDep, session: PageSessionDep, thing_id: int
    ) -> HTMLResponse:
        thing = next((t for t in things if t.id == thing_id and t.owner == session.owner), None)
        if thing is None:
            raise NotFound("No such thing")
        thing.active = not thing.active
        return pages.render(request, "thing_row.html", {"thing": thing})

    @router.get("/ticks")
    async def ticks(session: PageSessionDep) -> Response:
        async def events() -> AsyncIterator[PageEvent]:
            for n in range(1, 1000):
                yield PageEvent(f"<span>tick {n}</span>", event="tick", id=str(n))
                await asyncio.sleep(0.2)

        return event_stream(events())

    app.include_router(router)
    return app
