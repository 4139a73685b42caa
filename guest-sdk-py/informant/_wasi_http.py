"""Sends ``informant.http`` requests through the component's ``wasi:http`` imports.

Imported only inside a componentize-py build (it needs the generated ``wit_world`` bindings).
Each resource is dropped (``with``) as soon as it is done with, children before their parents
— a body's stream before the body, a future's pollable before the future, a response's
headers before the response — because ``wasi:http`` traps on a parent dropped first, and the
collector would drop them in no particular order.
"""

import re
from typing import Any, List, Tuple

from componentize_py_types import Err
from wit_world.imports import outgoing_handler, streams
from wit_world.imports import wasi_http_types as t

from .http import HttpError, InvalidRequest, Request, Response, error_for

_METHODS = {
    "GET": t.Method_Get,
    "HEAD": t.Method_Head,
    "POST": t.Method_Post,
    "PUT": t.Method_Put,
    "DELETE": t.Method_Delete,
    "OPTIONS": t.Method_Options,
    "PATCH": t.Method_Patch,
}


def _case(value: Any, prefix: str) -> str:
    """A generated variant case's WIT name in lowercase: ``ErrorCode_HttpRequestDenied`` is
    ``http-request-denied``."""
    name = type(value).__name__.removeprefix(prefix)
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _error(req: Request, code: Any) -> HttpError:
    """The exception for a generated ``error-code`` value."""
    payload = getattr(code, "value", None)
    return error_for(req, _case(code, "ErrorCode_"), None if payload is None else str(payload))


def _stream_error(req: Request, what: str, err: Any) -> HttpError:
    """The exception for a failed stream operation: the ``error-code`` behind it if the host
    gives one (a body over the memory cap, a timeout between bytes), else its description."""
    if not isinstance(err, streams.StreamError_LastOperationFailed):
        return HttpError(f"{req.method} {req.url}: {what}: the stream is closed")
    failure = err.value
    code = t.http_error_code(failure)
    if code is not None:
        return _error(req, code)
    return HttpError(f"{req.method} {req.url}: {what}: {failure.to_debug_string()}")


def _request(req: Request) -> "t.OutgoingRequest":
    fields = t.Fields()
    headers = list(req.headers)
    # A length rather than chunked encoding: some webhook receivers refuse chunked bodies.
    if req.body and not any(n.lower() == "content-length" for n, _ in headers):
        headers.append(("content-length", str(len(req.body))))
    for name, value in headers:
        try:
            fields.append(name, value.encode("utf-8"))
        except Err as e:
            fields.__exit__(None, None, None)
            why = _case(e.value, "HeaderError_")
            raise InvalidRequest(f"{req.method} {req.url}: header `{name}`: {why}") from None
    request = t.OutgoingRequest(fields)
    method = _METHODS.get(req.method)
    scheme = t.Scheme_Https() if req.scheme == "https" else t.Scheme_Http()
    for what, call in [
        ("method", lambda: request.set_method(method() if method else t.Method_Other(req.method))),
        ("scheme", lambda: request.set_scheme(scheme)),
        ("host", lambda: request.set_authority(req.authority)),
        ("path", lambda: request.set_path_with_query(req.path_with_query)),
    ]:
        try:
            call()
        except Err:
            request.__exit__(None, None, None)
            raise InvalidRequest(f"{req.method} {req.url}: invalid {what}") from None
    return request


def _options(timeout: float) -> "t.RequestOptions":
    options = t.RequestOptions()
    ns = int(timeout * 1e9)
    for set_timeout in (
        options.set_connect_timeout,
        options.set_first_byte_timeout,
        options.set_between_bytes_timeout,
    ):
        try:
            set_timeout(ns)
        except Err:
            pass  # A timeout the host cannot set is no reason to fail the request.
    return options


def _wait(req: Request, pending: "t.FutureIncomingResponse") -> "t.IncomingResponse":
    with pending:
        while True:
            got = pending.get()
            if got is not None:
                break
            # A WASI poll: the host's deadline for the event bounds this wait too.
            with pending.subscribe() as ready:
                ready.block()
    if isinstance(got, Err):
        raise HttpError(f"{req.method} {req.url}: response already taken")
    if isinstance(got.value, Err):
        raise _error(req, got.value.value)
    return got.value.value


def _read(req: Request, response: "t.IncomingResponse") -> Response:
    with response:
        status = response.status()
        with response.headers() as fields:
            headers: List[Tuple[str, str]] = [
                (k, v.decode("utf-8", errors="replace")) for k, v in fields.entries()
            ]
        chunks: List[bytes] = []
        with response.consume() as incoming:
            with incoming.stream() as stream:
                while True:
                    try:
                        chunks.append(stream.blocking_read(64 * 1024))
                    except Err as e:
                        if isinstance(e.value, streams.StreamError_Closed):
                            break
                        raise _stream_error(req, "reading the body", e.value) from None
    return Response(status, headers, b"".join(chunks))


def send(req: Request) -> Response:
    """Sends ``req`` through ``wasi:http/outgoing-handler`` and reads the whole answer."""
    request = _request(req)
    outgoing = request.body()
    try:
        with outgoing.write() as stream:
            for at in range(0, len(req.body), 4096):
                stream.blocking_write_and_flush(req.body[at : at + 4096])
    except Err as e:
        outgoing.__exit__(None, None, None)
        request.__exit__(None, None, None)
        raise _stream_error(req, "writing the body", e.value) from None
    try:
        pending = outgoing_handler.handle(request, _options(req.timeout))
    except Err as e:
        outgoing.__exit__(None, None, None)
        raise _error(req, e.value) from None
    try:
        t.OutgoingBody.finish(outgoing, None)
    except Err as e:
        pending.__exit__(None, None, None)
        raise _error(req, e.value) from None
    return _read(req, _wait(req, pending))

