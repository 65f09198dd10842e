"""The per-request database session under the name the kit's own tests and the services import
it by; its home is `servicekit.web_session`, below both this package and `servicekit.auth`."""

from servicekit.web_session import SessionDep, get_session

__all__ = ["SessionDep", "get_session"]
