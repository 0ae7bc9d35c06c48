"""Reading a request: its JSON body (bounded, before it is read where the client said
its length; NaN and Infinity refused), integer query parameters, the app's gateway. Every
problem is an ApiError with the status and a text naming the limit or the parameter."""
from __future__ import annotations

from typing import Any, Optional

from aiohttp import web

from jm.api import ApiError
from jm.fastjson import loads

from rest.gateway import Gateway
from rest.middleware import GATEWAY, MAX_BODY


async def json_body(request: web.Request, optional: bool = False,
                     limit: Optional[tuple[str, int]] = None) -> Any:
    """The request's JSON body; 413 naming the limit's key (`limit`: (key, bytes), else
    rest.max-body-size) when it is larger, checked before it is read where the client
    said its length."""
    key, most = limit if limit is not None else ("rest.max-body-size", request.app[MAX_BODY])
    raw = await body_bytes(request, key, most)
    if not raw.strip():
        if optional:
            return {}
        raise ApiError(400, "the request body is empty; expected a JSON job spec")
    try:
        return loads(raw, parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"malformed JSON: {exc}")
    except RecursionError:
        raise ApiError(400, "malformed JSON: nested too deeply") from None


BODY = web.RequestKey("jm_body", bytes)  # the body as read (a proxy sends it on)


async def body_bytes(request: web.Request, key: str = "rest.max-body-size",
                     most: Optional[int] = None) -> bytes:
    """The request's body, read no further than `most` bytes (413 naming `key` beyond:
    before anything is read where the client said its length, else as soon as the
    chunks it sends pass it). Kept on the request: a second call answers the same."""
    if BODY in request:
        return request[BODY]
    most = request.app[MAX_BODY] if most is None else most
    if request.content_length is not None and request.content_length > most:
        raise ApiError(413, f"request body too large ({request.content_length} bytes; limit "
                            f"{key}, {most} bytes)")
    raw = bytearray()
    async for chunk in request.content.iter_chunked(1 << 16):
        raw += chunk
        if len(raw) > most:
            raise ApiError(413, f"request body too large (more than {most} bytes; limit "
                                f"{key})")
    request[BODY] = bytes(raw)
    return request[BODY]


def _not_json(name: str) -> Any:
    """NaN, Infinity and -Infinity: Python's json reads them, JSON has none (and an
    answer echoing one would not be JSON)."""
    raise ValueError(f"{name} is not a JSON value")


def gw(request: web.Request) -> Gateway:
    return request.app[GATEWAY]


def int_param(request: web.Request, name: str, minimum: int) -> Optional[int]:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer, got {raw!r}")
    if value < minimum:
        raise ApiError(400, f"{name} must be at least {minimum}")
    return value


def int_or(request: web.Request, name: str, default: Optional[int]) -> Optional[int]:
    """A non-negative integer query parameter (int_param), or `default` when absent."""
    value = int_param(request, name, 0)
    return default if value is None else value
