"""Domain errors. Each carries the HTTP status the API maps it to.

Logic and database code raise these; routers never build error responses by
hand, and the CLI prints ``str(error)`` as its one line on stderr.
"""

from __future__ import annotations

from http import HTTPStatus


class WmsError(Exception):
    """Base of every error the system reports to a user."""

    status: HTTPStatus = HTTPStatus.INTERNAL_SERVER_ERROR

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.message = message
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class InvalidInput(WmsError):
    """The request is malformed or breaks a rule; nothing was stored."""

    status = HTTPStatus.BAD_REQUEST


class JDLError(InvalidInput):
    """A job description cannot be parsed or is not a valid job.

    ``where`` names the source (a file name or ``job 3``) and, when known,
    the line and column: ``hello.jdl:4:12``.
    """


class ConfigError(WmsError):
    """A configuration file is wrong: ``where`` is ``file:line``."""

    status = HTTPStatus.INTERNAL_SERVER_ERROR


class NotFound(WmsError):
    status = HTTPStatus.NOT_FOUND


class Forbidden(WmsError):
    status = HTTPStatus.FORBIDDEN


class Unauthorized(WmsError):
    status = HTTPStatus.UNAUTHORIZED


class Conflict(WmsError):
    """The request cannot be applied in the object's current state."""

    status = HTTPStatus.CONFLICT


class TooLarge(InvalidInput):
    """The request or one of its parts is larger than its limit (wms.yaml ``limits``)."""

    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE


class Unavailable(WmsError):
    """The service cannot answer now (a database statement ran out of time); try again."""

    status = HTTPStatus.SERVICE_UNAVAILABLE


class RequestTimeout(WmsError):
    """The client did not send its request in time (a body that stalled)."""

    status = HTTPStatus.REQUEST_TIMEOUT


class TooManyRequests(WmsError):
    """The server sheds load, or the caller holds its share of it: come back after ``retry_after`` seconds."""

    status = HTTPStatus.TOO_MANY_REQUESTS

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
