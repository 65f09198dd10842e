"""A service's pages: `Pages(app, settings, prefix=...)` renders templates
through the shared layout, opens and reads page sessions, guards every change with CSRF and
shows errors under its prefix as pages in the layout instead of JSON."""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

import structlog
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from itsdangerous import BadSignature, URLSafeSerializer
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import Principal, principal_from_api_key
from servicekit.auth.page_sessions import (
    LevelOf,
    PageSessionRepository,
    expires_at,
    hash_token,
    moment,
    new_token,
    same_level,
    session_times,
    session_verdict,
)
from servicekit.auth.throttle import FailureLimiter, client_key
from servicekit.errors import ServiceError
from servicekit.web.pages.assets import AssetCatalog
from servicekit.web.pages.csrf import (
    CSRF_FIELD,
    CSRF_HEADER,
    SAFE_METHODS,
    CsrfRefused,
    CsrfTokens,
    same_origin,
)
from servicekit.web.pages.page_session import (
    PageSession,
    PageSettings,
    SessionCookie,
    SessionState,
)
from servicekit.web.pages.templating import template_environment
from servicekit.web_session import SessionDep

logger = structlog.get_logger(__name__)

Handler = Callable[[Request, Exception], Awaitable[Response]]
FLASH_KINDS = ("success", "info", "warning", "error")
# Per-request values live in the request's scope, not in `request.state`: an ASGI server may
# hand every request the same lifespan state dict (asgi-lifespan does), and a session read
# for one request must never answer for the next.
_SESSION_KEY = "servicekit.page_session"
_NONCE_KEY = "servicekit.csrf_nonce"
_STATUS_TITLES = {
    400: "Bad request",
    401: "Sign-in needed",
    403: "Not allowed",
    404: "Not found",
    405: "Not allowed here",
    409: "Conflict",
    410: "No longer valid",
    413: "Too large",
    422: "Check the form",
    429: "Too many requests",
    503: "Unavailable",
}


@dataclass(frozen=True)
class NavItem:
    label: str
    href: str


@dataclass(frozen=True)
class Flash:
    text: str
    kind: str = "success"


class LoginRequired(Exception):
    """No valid page session: answered with a redirect to the login page."""

    def __init__(self, next_path: str, reason: SessionState | None = None) -> None:
        super().__init__(next_path)
        self.next_path = next_path
        self.reason = reason


class TooManySignIns(ServiceError):
    """Too many failed key sign-ins from one address (see `servicekit.auth.throttle`)."""

    status_code = 429
    code = "too_many_sign_ins"
    default_message = "Too many failed sign-ins from your address. Wait a minute, then try again."


class Pages:
    """`Pages(app, settings, prefix=..., sessions=Table, ...)`: the app's pages under `prefix`,
    their sessions kept as rows of the service's `sessions` table (see
    `servicekit.auth.page_sessions`). `session_level` maps an API key's level to the level of
    the sessions it opens (the portal gives an operator key an admin session)."""

    def __init__(
        self,
        app: FastAPI,
        settings: PageSettings,
        *,
        prefix: str,
        site_name: str,
        login_path: str,
        sessions: type[SQLModel],
        session_level: LevelOf = same_level,
        logout_path: str | None = None,
        nav: Sequence[NavItem] = (),
        template_dirs: Sequence[Path] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.prefix = prefix.rstrip("/")
        self.site_name = site_name
        self.login_path = login_path
        self.logout_path = logout_path
        self.nav = tuple(nav)
        catalog: AssetCatalog = app.state.assets
        self.templates = template_environment(catalog, template_dirs)
        self.clock = clock
        PageSessionRepository.check_table(sessions)
        self.session_table = sessions
        self.session_level = session_level
        self.service_name = settings.service_name
        self.cookie = SessionCookie(settings.session_secret, settings.service_name)
        self.sign_in_limiter = FailureLimiter(
            settings.sign_in_failure_limit, settings.sign_in_failure_window_seconds
        )
        self.csrf = CsrfTokens(settings.session_secret)
        self._flash_serializer = URLSafeSerializer(
            settings.session_secret.get_secret_value(), salt="servicekit.flash"
        )
        # `__Host-` in production: the browser then insists on Secure, Path=/ and no Domain,
        # so no sibling subdomain can set or shadow the cookie.
        host_prefix = "__Host-" if settings.is_production else ""
        self.session_cookie = f"{host_prefix}{settings.service_name}-session"
        self.csrf_cookie = f"{host_prefix}{settings.service_name}-csrf"
        self.flash_cookie = f"{host_prefix}{settings.service_name}-flash"
        _install(app, self)

    # -- sessions ---------------------------------------------------------------------------

    async def start_session(
        self,
        db: AsyncSession,
        response: Response,
        owner: str,
        level: AccessLevel,
        *,
        api_key_id: uuid.UUID | None,
    ) -> PageSession:
        """Sign `owner` in at `level` on `response`: a new row and a new random token (whatever
        came before). `api_key_id` is the key the session stands on (signed in with, or the
        issuer of its link); None only for an operator's CLI link."""
        token = new_token()
        now = self.clock()
        created, expires = session_times(
            now, idle_seconds=self._idle_seconds, max_seconds=self._max_seconds
        )
        await self._sessions(db).add(
            id_hash=hash_token(token),
            service=self.service_name,
            owner=owner,
            level=level.value,
            api_key_id=api_key_id,
            created_at=created,
            last_seen_at=created,
            expires_at=expires,
        )
        self._set_cookie(response, self.session_cookie, self.cookie.encode(token))
        return PageSession(owner, level, hash_token(token), now, now, api_key_id)

    async def end_session(self, request: Request, db: AsyncSession, response: Response) -> None:
        """Sign out: the row is deleted, so the cookie opens nothing any more, anywhere."""
        token = self._token(request)
        if token is not None:
            await self._sessions(db).remove(hash_token(token))
        request.scope[_SESSION_KEY] = (None, None)
        response.delete_cookie(self.session_cookie, path="/", secure=self._secure)

    async def key_sign_in(
        self, request: Request, db: AsyncSession, api_key: str
    ) -> Principal | None:
        """The principal of the key typed in a sign-in form, or None (a failure, counted against
        the client's address); TooManySignIns (429) while the address has failed too often,
        without looking at the key."""
        client = client_key(request.client.host if request.client else None)
        now = self.clock()
        wait = self.sign_in_limiter.retry_after(client, now)
        if wait is not None:
            raise TooManySignIns(headers={"Retry-After": str(math.ceil(wait))})
        key = api_key.strip()
        principal = await principal_from_api_key(db, key) if key else None
        if principal is None:
            self.sign_in_limiter.record_failure(client, now)
        return principal

    def session_of(self, request: Request) -> PageSession | None:
        """The request's valid session as the page's dependency loaded it, or None; never
        queries, never raises."""
        cached: tuple[PageSession | None, SessionState | None] | None = request.scope.get(
            _SESSION_KEY
        )
        return None if cached is None else cached[0]

    async def require_session(self, request: Request, db: AsyncSession) -> PageSession:
        session, state = await self.load_session(request, db)
        if session is None:
            raise LoginRequired(_path_with_query(request), state)
        return session

    async def load_session(
        self, request: Request, db: AsyncSession
    ) -> tuple[PageSession | None, SessionState | None]:
        """The request's session if it still holds (its row exists for this service, within
        its limits, its key live at the same level), and why not otherwise; once a request."""
        cached: tuple[PageSession | None, SessionState | None] | None = request.scope.get(
            _SESSION_KEY
        )
        if cached is not None:
            return cached
        token = self._token(request)
        sessions = self._sessions(db)
        found = await sessions.load(hash_token(token), self.service_name) if token else None
        session: PageSession | None = None
        state: SessionState | None = None
        if found is not None:
            session, key = found
            now = self.clock()
            state = session_verdict(
                session,
                key,
                now,
                idle_seconds=self._idle_seconds,
                max_seconds=self._max_seconds,
                level_of=self.session_level,
            )
            if state is not SessionState.VALID:
                session = None
            elif session.needs_refresh(now):
                session = session.seen(now)
                deadline = expires_at(
                    session.issued_at,
                    now,
                    idle_seconds=self._idle_seconds,
                    max_seconds=self._max_seconds,
                )
                await sessions.touch(session.session_id, moment(now), moment(deadline))
        request.scope[_SESSION_KEY] = (session, state)
        return session, state

    async def session_holds(self, request: Request) -> bool:
        """Whether the request's session still holds now, read again in a transaction of its
        own: a long-lived response (a live stream) asks before it shows more, so sign-out, a
        revoked key or a changed level end it too."""
        request.scope.pop(_SESSION_KEY, None)
        factory = request.app.state.session_factory
        async with factory() as db, db.begin():
            session, _ = await self.load_session(request, db)
        return session is not None

    async def load_session_for_error_page(self, request: Request) -> None:
        """An error page shows who is signed in too: the session is read in a transaction of
        its own when the page's dependency did not get to it (an unknown path, say)."""
        if request.scope.get(_SESSION_KEY) is not None or self._token(request) is None:
            return
        factory = getattr(request.app.state, "session_factory", None)
        if factory is None:
            return
        # Best effort: the error being answered may be the database's own.
        with contextlib.suppress(Exception):
            async with factory() as db, db.begin():
                await self.load_session(request, db)

    def _token(self, request: Request) -> str | None:
        raw = request.cookies.get(self.session_cookie)
        return self.cookie.decode(raw) if raw else None

    def _sessions(self, db: AsyncSession) -> PageSessionRepository[Any]:
        return PageSessionRepository(db, self.session_table)

    @property
    def _idle_seconds(self) -> float:
        return self.settings.session_idle_minutes * 60

    @property
    def _max_seconds(self) -> float:
        return self.settings.session_max_hours * 3600

    # -- CSRF ---------------------------------------------------------------------------------

    def csrf_token(self, request: Request) -> str:
        nonce = request.cookies.get(self.csrf_cookie)
        if not nonce:
            # One per request: the cookie is set on the response that carries the token.
            nonce = request.scope.get(_NONCE_KEY) or self.csrf.new_nonce()
            request.scope[_NONCE_KEY] = nonce
        return self.csrf.token_for(nonce)

    async def verify_csrf(self, request: Request) -> None:
        if request.method in SAFE_METHODS:
            return
        if not same_origin(request.headers.get("origin"), request.headers.get("host")):
            raise CsrfRefused("Cross-origin form posts are refused")
        sent = request.headers.get(CSRF_HEADER)
        content_type = request.headers.get("content-type", "")
        if sent is None and content_type.startswith(
            ("application/x-www-form-urlencoded", "multipart/form-data")
        ):
            value = (await request.form()).get(CSRF_FIELD)
            sent = None if isinstance(value, UploadFile) else value
        if not self.csrf.verify(request.cookies.get(self.csrf_cookie), sent):
            raise CsrfRefused()

    # -- flashes ------------------------------------------------------------------------------

    def flash(self, response: Response, text: str, kind: str = "success") -> None:
        """A message for the next page shown (after a POST's redirect)."""
        if kind not in FLASH_KINDS:
            raise ValueError(f"flash kind must be one of {FLASH_KINDS}")
        self._set_cookie(response, self.flash_cookie, self._flash_serializer.dumps([text, kind]))

    def _flashes(self, request: Request) -> list[Flash]:
        raw = request.cookies.get(self.flash_cookie)
        if not raw:
            return []
        try:
            text, kind = self._flash_serializer.loads(raw)
        except (BadSignature, ValueError, TypeError):
            return []
        return [Flash(str(text), str(kind) if kind in FLASH_KINDS else "info")]

    # -- rendering ----------------------------------------------------------------------------

    def render(
        self,
        request: Request,
        template: str,
        context: dict[str, Any] | None = None,
        *,
        status_code: int = 200,
        headers: dict[str, str] | None = None,
    ) -> HTMLResponse:
        """`template` with the layout's context: site, navigation, session, CSRF token,
        flashes. Responses are never cached: they hold a person's data and a token."""
        session = self.session_of(request)
        flashes = self._flashes(request)
        page_context = {
            "request": request,
            "site_name": self.site_name,
            "home_path": self.prefix + "/",
            "nav": self.nav,
            "current_path": request.url.path,
            "session": session,
            "csrf_token": self.csrf_token(request),
            "csrf_field_name": CSRF_FIELD,
            "csrf_header": CSRF_HEADER,
            "flashes": flashes,
            "logout_path": self.logout_path,
            "htmx_request": request.headers.get("hx-request") == "true",
            **(context or {}),
        }
        html = self.templates.get_template(template).render(page_context)
        response = HTMLResponse(
            html, status_code=status_code, headers={"Cache-Control": "no-store", **(headers or {})}
        )
        self._finish(request, response, flashes)
        return response

    def _finish(self, request: Request, response: Response, flashes: list[Flash]) -> None:
        nonce = request.scope.get(_NONCE_KEY)
        if nonce:
            self._set_cookie(response, self.csrf_cookie, nonce, strict=True)
        if flashes:
            response.delete_cookie(self.flash_cookie, path="/", secure=self._secure)

    @property
    def _secure(self) -> bool:
        return self.settings.is_production

    def _set_cookie(
        self, response: Response, name: str, value: str, *, strict: bool = False
    ) -> None:
        # No max_age: a browser session cookie; the row on the server carries the expiry.
        response.set_cookie(
            name,
            value,
            path="/",
            httponly=True,
            secure=self._secure,
            samesite="strict" if strict else "lax",
        )

    # -- routing and errors ------------------------------------------------------------------

    def router(self) -> APIRouter:
        """The router for the service's pages: every non-GET route checks the CSRF token."""
        return APIRouter(
            prefix=self.prefix,
            include_in_schema=False,
            default_response_class=HTMLResponse,
            dependencies=[Depends(self.verify_csrf)],
        )

    def owns(self, request: Request) -> bool:
        path = request.url.path
        return path == self.prefix or path.startswith(self.prefix + "/")

    def login_redirect(self, request: Request, next_path: str) -> Response:
        target = f"{self.login_path}?next={quote(next_path, safe='/')}"
        if request.headers.get("hx-request") == "true":
            # htmx follows this with a full page load instead of swapping a login form in.
            return Response(status_code=204, headers={"HX-Redirect": target})
        return RedirectResponse(target, status_code=303)

    def safe_next(self, next_path: str | None) -> str:
        """Where to go after signing in: only a path under the prefix, never another site."""
        default = self.prefix + "/"
        if not next_path or urlsplit(next_path).netloc or not next_path.startswith(default):
            return default
        return next_path if not next_path.startswith("//") else default

    def error_page(self, request: Request, exc: Exception) -> HTMLResponse:
        status, message, headers = 500, "Something went wrong on our side.", {}
        if isinstance(exc, ServiceError):
            status, message, headers = exc.status_code, exc.message, exc.headers
        elif isinstance(exc, StarletteHTTPException):
            status, headers = exc.status_code, dict(exc.headers or {})
            message = exc.detail if isinstance(exc.detail, str) else message
        elif isinstance(exc, RequestValidationError):
            status, message = 422, "Some fields are missing or invalid."
        if status >= 500:
            logger.exception("unhandled error on a page", path=request.url.path)
            message = "Something went wrong on our side."
        context = {
            "status": status,
            "title": _STATUS_TITLES.get(status, "Error"),
            "message": message,
            "request_id": getattr(request.state, "request_id", ""),
        }
        return self.render(request, "kit/error.html", context, status_code=status, headers=headers)


def _install(app: FastAPI, pages: Pages) -> None:
    """The app's error handlers answer pages under the prefix, and a missing session there
    redirects to the login page."""
    app.state.pages = pages
    for error_class in (ServiceError, RequestValidationError, StarletteHTTPException, Exception):
        app.add_exception_handler(
            error_class, _page_aware(pages, app.exception_handlers.get(error_class))
        )

    async def on_login_required(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LoginRequired)
        return pages.login_redirect(request, exc.next_path)

    app.add_exception_handler(LoginRequired, on_login_required)


def _page_aware(pages: Pages, api_handler: Any) -> Handler:
    async def handle(request: Request, exc: Exception) -> Response:
        if pages.owns(request) or api_handler is None:
            if pages.owns(request):
                await pages.load_session_for_error_page(request)
            return pages.error_page(request, exc)
        response: Response = await api_handler(request, exc)
        return response

    return handle


def _path_with_query(request: Request) -> str:
    query = request.url.query
    return f"{request.url.path}?{query}" if query else request.url.path


def get_pages(request: Request) -> Pages:
    pages: Pages = request.app.state.pages
    return pages


async def _require_session(request: Request, db: SessionDep) -> PageSession:
    return await get_pages(request).require_session(request, db)


async def _optional_session(request: Request, db: SessionDep) -> PageSession | None:
    session, _ = await get_pages(request).load_session(request, db)
    return session


async def verify_page_csrf(request: Request) -> None:
    await get_pages(request).verify_csrf(request)


def page_router() -> APIRouter:
    """A module-level router for a service's pages, included under the prefix of its `Pages`
    (`app.include_router(router, prefix=...)`): every non-GET route checks the CSRF token of
    the app's `Pages`, reached through `app.state` as its handlers reach it (`PagesDep`)."""
    return APIRouter(
        include_in_schema=False,
        default_response_class=HTMLResponse,
        dependencies=[Depends(verify_page_csrf)],
    )


PagesDep = Annotated[Pages, Depends(get_pages)]
PageSessionDep = Annotated[PageSession, Depends(_require_session)]
"""The signed-in session, checked against its row on every request; without one (signed out,
expired, its key revoked or at another level) the page redirects to login."""
OptionalPageSessionDep = Annotated[PageSession | None, Depends(_optional_session)]
