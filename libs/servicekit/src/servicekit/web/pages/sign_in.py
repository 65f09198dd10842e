"""Sign-in, sign-out and the two pages of a one-time link, the same in every service's pages:
`sign_in_router(SignInPages(...), links)` is included under the prefix of the app's `Pages`.

A key is checked by `Pages.key_sign_in` (throttled per address) and opens a session at the
level `Pages.session_level` gives it; a link is checked and spent by the service's
`SignInLinks`, which `links` (a FastAPI dependency) hands over."""

# No `from __future__ import annotations`: FastAPI reads the route functions' annotations at
# run time, and `LinksDep` is a name of the factory, not of the module.

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from servicekit.web.pages.links import SignInLinks, landing_page, signed_in
from servicekit.web.pages.site import OptionalPageSessionDep, PagesDep, page_router
from servicekit.web_session import SessionDep

# A key is some 50 characters; longer text is no key, and a `next` no path of ours.
MAX_KEY_CHARS = 200
MAX_NEXT_CHARS = 2000

LinksDependency = Callable[..., Awaitable[SignInLinks[Any]]]


@dataclass(frozen=True)
class SignInPages:
    """What differs between the services' sign-in pages.

    `template`: the sign-in form (given `title`, `next` and `error`); `refused`: what it says
    at the key when a key does not sign in; `destination`: what a link's landing page says it
    opens ("the dashboard"); `landing`: where an opened link leads; `signed_out`: flashed on
    the sign-in page after signing out (None: nothing)."""

    template: str
    refused: str
    destination: str
    landing: str
    signed_out: str | None = None


def sign_in_router(config: SignInPages, links: LinksDependency) -> APIRouter:
    """`GET`/`POST /login`, `POST /logout`, `GET`/`POST /link/{token}`; `links` is the
    dependency that gives the service's `SignInLinks`."""
    LinksDep = Annotated[SignInLinks[Any], Depends(links)]
    router = page_router()

    @router.get("/login")
    async def login_form(
        request: Request, pages: PagesDep, session: OptionalPageSessionDep, next: str = ""
    ) -> HTMLResponse:
        # The session is read so that the layout shows who is signed in already.
        context = {"title": "Sign in", "next": next, "error": None}
        return pages.render(request, config.template, context)

    @router.post("/login")
    async def login(
        request: Request,
        pages: PagesDep,
        db: SessionDep,
        api_key: Annotated[str, Form(max_length=MAX_KEY_CHARS)] = "",
        next: Annotated[str, Form(max_length=MAX_NEXT_CHARS)] = "",
    ) -> Response:
        principal = await pages.key_sign_in(request, db, api_key)
        if principal is None:
            context = {"title": "Sign in", "next": next, "error": config.refused}
            return pages.render(request, config.template, context, status_code=401)
        response = RedirectResponse(pages.safe_next(next), status_code=303)
        level = pages.session_level(principal.level)
        await pages.start_session(db, response, principal.owner, level, api_key_id=principal.key_id)
        return response

    @router.post("/logout")
    async def logout(request: Request, pages: PagesDep, db: SessionDep) -> Response:
        response = RedirectResponse(pages.login_path, status_code=303)
        await pages.end_session(request, db, response)
        if config.signed_out is not None:
            pages.flash(response, config.signed_out, "info")
        return response

    @router.get("/link/{token}")
    async def link_landing(
        request: Request, token: str, pages: PagesDep, checker: LinksDep
    ) -> HTMLResponse:
        link = await checker.check(token)
        return landing_page(pages, request, link, destination=config.destination)

    @router.post("/link/{token}")
    async def link_open(token: str, pages: PagesDep, db: SessionDep, checker: LinksDep) -> Response:
        return await signed_in(pages, db, await checker.redeem(token), config.landing)

    return router


__all__ = ["SignInPages", "sign_in_router"]
