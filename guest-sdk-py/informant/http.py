"""Outbound HTTP through the host's ``wasi:http/outgoing-handler``; failures raise ``HttpError``s.

The host sends a request only to an origin (``scheme://host:port``) listed in the plugin's
manifest ``allowed-outbound-hosts`` (and inside its tenant's ceiling); anything else raises
``Denied`` before any connection. Redirects are not followed: a ``3xx`` comes back as the
``Response``. ``timeout`` (seconds) bounds connecting and each wait for bytes; the event's
deadline bounds the whole call, whatever ``timeout`` says.

    from informant import http

    r = http.post_json("https://hooks.example.com/x", {"text": "hello"}, timeout=2)
    if not r.ok:
        raise Retry(f"webhook answered {r.status}")

In tests, ``informant.testing.Harness`` records each request (``harness.http.requests``) and
answers from canned responses (``harness.http.respond(url, status, body)``); a request with
none raises ``HttpError``, as there is no host to send it through.
"""

import json as _json
from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from . import _backend

#: Seconds ``send`` waits to connect and for each chunk of the answer unless told otherwise.
DEFAULT_TIMEOUT = 30.0

Headers = Union[Mapping[str, str], Sequence[Tuple[str, str]]]


class HttpError(Exception):
    """A request that got no response; the subclass says why, the message names the request.

    ``code`` is the ``wasi:http`` error code in lowercase (``connection-refused``,
    ``http-request-denied``, ...), or None when the failure happened in the plugin (a malformed
    URL or header).
    """

    def __init__(self, message: str, code: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.code = code


class Denied(HttpError):
    """Refused by the host before any connection: the origin is not in the plugin's
    ``allowed-outbound-hosts`` (or its tenant's), or the request is not canonical."""


class Timeout(HttpError):
    """Connecting or a wait for the answer outlasted ``timeout``."""


class InvalidRequest(HttpError, ValueError):
    """The URL, method or a header cannot be sent (the message says which)."""


@dataclass
class Request:
    """One request, as the SDK hands it to the host (and as the test harness records it)."""

    method: str
    url: str
    headers: List[Tuple[str, str]]
    body: bytes
    #: Seconds; see ``send``.
    timeout: float
    #: ``http`` or ``https``.
    scheme: str = field(init=False)
    #: ``host[:port]`` as written in the URL.
    authority: str = field(init=False)
    #: The path and query (``/`` when the URL has none).
    path_with_query: str = field(init=False)

    def __post_init__(self) -> None:
        self.scheme, self.authority, self.path_with_query = split_url(self.url)

    def text(self) -> str:
        """The body as UTF-8 text."""
        return self.body.decode("utf-8")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return _json.loads(self.body)


@dataclass
class Response:
    """An HTTP response: its status, headers and whole body."""

    #: The status code (a redirect's ``3xx`` included: redirects are not followed).
    status: int
    #: The header fields as received (names lowercase), in order.
    headers: List[Tuple[str, str]]
    #: The body, read to its end.
    body: bytes

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    def header(self, name: str) -> Optional[str]:
        """The first value of header ``name`` (any case), or None."""
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def text(self, encoding: str = "utf-8") -> str:
        """The body decoded as text (invalid bytes replaced)."""
        return self.body.decode(encoding, errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return _json.loads(self.body)


# The wasi:http error codes that mean a wait ran out.
_TIMEOUTS = {
    "dns-timeout",
    "connection-timeout",
    "connection-read-timeout",
    "connection-write-timeout",
    "http-response-timeout",
}

_DENIED = (
    "denied by the host: the origin is not in the plugin's `allowed-outbound-hosts` "
    "(or its tenant's)"
)


def error_for(request: "Request", code: str, detail: Optional[str] = None) -> HttpError:
    """The exception for ``wasi:http`` error ``code`` (lowercase, e.g. ``connection-refused``)
    answering ``request``, with the case's payload as ``detail`` when it has one."""
    if code == "http-request-denied":
        return Denied(f"{request.method} {request.url}: {_DENIED}", code)
    why = code if detail is None else f"{code}: {detail}"
    cls = Timeout if code in _TIMEOUTS else HttpError
    return cls(f"{request.method} {request.url}: {why}", code)


def split_url(url: str) -> Tuple[str, str, str]:
    """``(scheme, authority, path_with_query)`` of an absolute http(s) URL, as ``wasi:http``
    wants them; raises ``InvalidRequest`` otherwise. The host checks the authority."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise InvalidRequest(f"`{url}` is not an absolute http(s) URL")
    scheme = scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidRequest(f"`{url}`: only http and https are supported")
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, path = rest[:end], rest[end:]
    if not authority:
        raise InvalidRequest(f"`{url}` names no host")
    return scheme, authority, path or "/"


def send(
    method: str,
    url: str,
    headers: Optional[Headers] = None,
    body: Union[bytes, str] = b"",
    timeout: float = DEFAULT_TIMEOUT,
) -> Response:
    """Sends one request and reads the whole answer.

    ``headers`` is a mapping or a list of pairs (a ``content-length`` is added for a body);
    ``body`` text is sent as UTF-8; ``timeout`` (seconds) bounds connecting and each wait for
    bytes. Raises ``Denied``, ``Timeout``, ``InvalidRequest`` or another ``HttpError``.
    """
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers or [])
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    if not timeout > 0:
        raise InvalidRequest(f"{method} {url}: timeout must be positive, got {timeout}")
    return _backend.current.http_send(Request(method.upper(), url, pairs, data, float(timeout)))


def get(url: str, headers: Optional[Headers] = None, timeout: float = DEFAULT_TIMEOUT) -> Response:
    """GETs ``url``."""
    return send("GET", url, headers, b"", timeout)


def post_json(url: str, value: Any, timeout: float = DEFAULT_TIMEOUT) -> Response:
    """POSTs ``value`` as JSON (``content-type: application/json``) to ``url``."""
    body = _json.dumps(value, separators=(",", ":"))
    return send("POST", url, [("content-type", "application/json")], body, timeout)
