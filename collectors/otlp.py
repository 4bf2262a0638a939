"""OTLP/HTTP trace receiver: ``POST /v1/traces`` as a FastAPI router (or a small app).

Follows ``opentelemetry-proto``'s OTLP/HTTP contract: ``application/x-protobuf`` and
``application/json`` bodies (OTLP/JSON: hex trace and span ids, converted before
``json_format`` sees them, since it would read them as base64), optional
``Content-Encoding: gzip``, a size cap on the body both as sent and after
decompression (413; gzip is inflated incrementally, so a gzip bomb stops at the cap),
and 200 with an empty ``ExportTraceServiceResponse`` in the request's encoding.
Undecodable bodies get 400 and an unsupported content type or encoding 415, each with
a ``google.rpc.Status`` naming the problem. Received spans go to ``on_spans`` as
``SpanRecord``s; ``on_requests`` (optional) gets the request records derived from them.
A sink that cannot take more raises :class:`ReceiverBusy`: 503 with ``Retry-After``.

``collectors.trace_writer.TraceWriter`` is the sink ``tailwatch collect`` uses.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from collectors.request_records import RequestRecord, SpanRecord, request_records, span_records

logger = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024  # the spec's recommended cap
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_ID_FIELDS = {
    "traceId": 16,
    "trace_id": 16,
    "spanId": 8,
    "span_id": 8,
    "parentSpanId": 8,
    "parent_span_id": 8,
}
# google.rpc.Code values
_INVALID_ARGUMENT, _RESOURCE_EXHAUSTED, _UNAVAILABLE = 3, 8, 14


class ReceiverBusy(Exception):
    """Raised by a sink that cannot take an export now (its queue is full, it is closing).
    The receiver answers 503 with ``Retry-After``, which OTLP exporters retry; nothing is
    logged here (the sink logs)."""

    def __init__(self, message: str, retry_after_seconds: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class OtlpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def read_body(
    chunks: AsyncIterator[bytes], encoding: str, max_bytes: int, declared: int | None
) -> bytes:
    """The body, inflated if gzip, never holding more than ``max_bytes`` of either form."""
    if declared is not None and declared > max_bytes:
        raise OtlpError(413, f"body of {declared} bytes exceeds the {max_bytes}-byte limit")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding == "gzip" else None
    received, out = 0, bytearray()
    async for chunk in chunks:
        received += len(chunk)
        if received > max_bytes:
            raise OtlpError(413, f"body exceeds the {max_bytes}-byte limit")
        if inflater is None:
            out += chunk
            continue
        data = chunk
        while data:
            try:
                # At most one byte past the cap is inflated, whatever the ratio.
                out += inflater.decompress(data, max_bytes + 1 - len(out))
            except zlib.error as error:
                raise OtlpError(400, f"body is not valid gzip: {error}") from None
            if len(out) > max_bytes:
                raise OtlpError(413, f"decompressed body exceeds the {max_bytes}-byte limit")
            if inflater.eof:  # a concatenated gzip member may follow
                data = inflater.unused_data
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if data else inflater
            else:
                data = inflater.unconsumed_tail
    if inflater is not None and not inflater.eof and (received or out):
        raise OtlpError(400, "body is truncated gzip (no end of stream)")
    return bytes(out)


def _hex_ids_to_base64(node: Any) -> None:
    """OTLP/JSON ids are hex; protobuf's JSON mapping of bytes is base64. Convert in place."""
    if isinstance(node, list):
        for item in node:
            _hex_ids_to_base64(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            size = _ID_FIELDS.get(key)
            if size is not None and isinstance(value, str):
                if value == "" and "parent" in key.lower():
                    continue
                try:
                    raw = bytes.fromhex(value)
                except ValueError:
                    raise OtlpError(400, f"{key} {value!r} is not a hex string") from None
                if len(raw) != size:
                    raise OtlpError(400, f"{key} {value!r} must be {2 * size} hex digits")
                node[key] = base64.b64encode(raw).decode()
            else:
                _hex_ids_to_base64(value)


def decode_request(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    if content_type == PROTOBUF:
        try:
            message.ParseFromString(body)
        except DecodeError as error:
            raise OtlpError(
                400, f"body is not an OTLP protobuf ExportTraceServiceRequest: {error}"
            ) from None
        return message
    if not body:  # NOTE: as an empty protobuf body is: an export of nothing (docs/collectors.md)
        return message
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise OtlpError(400, f"body is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise OtlpError(400, "OTLP/JSON body must be an object with resourceSpans")
    _hex_ids_to_base64(document.get("resourceSpans", document.get("resource_spans")))
    try:
        json_format.ParseDict(document, message, ignore_unknown_fields=True)
    except (json_format.ParseError, binascii.Error, TypeError, ValueError) as error:
        raise OtlpError(
            400, f"body is not an OTLP/JSON ExportTraceServiceRequest: {error}"
        ) from None
    return message


def _encode(message: Message, content_type: str) -> bytes:
    if content_type == JSON:
        return json_format.MessageToJson(message, indent=None).encode()
    return message.SerializeToString()


def _error(status: int, message: str, content_type: str) -> Response:
    code = {413: _RESOURCE_EXHAUSTED, 503: _UNAVAILABLE}.get(status, _INVALID_ARGUMENT)
    body = Status(code=code, message=message)
    return Response(_encode(body, content_type), status, media_type=content_type)


def _unavailable(message: str, retry_after_seconds: float, content_type: str) -> Response:
    """503 with ``Retry-After`` in whole seconds (RFC 9110's delay-seconds; some exporters
    read no fractions), which the OTLP/HTTP exporters wait before they retry."""
    response = _error(503, message, content_type)
    response.headers["Retry-After"] = str(max(0, math.ceil(retry_after_seconds)))
    return response


def otlp_router(
    on_spans: Callable[[list[SpanRecord]], None],
    *,
    on_requests: Callable[[list[RequestRecord]], None] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    path: str = TRACES_PATH,
) -> APIRouter:
    """A router serving ``POST {path}``; the sinks run in the request, so a slow sink
    slows the exporter (which retries on the 503 a failing sink produces)."""
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes={max_body_bytes!r}: must be a positive integer")
    router = APIRouter()

    @router.post(path, include_in_schema=False)
    async def export_traces(request: Request) -> Response:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        reply_type = content_type if content_type in (PROTOBUF, JSON) else PROTOBUF
        if content_type not in (PROTOBUF, JSON):
            return _error(
                415, f"unsupported Content-Type {content_type!r}: send {PROTOBUF} or {JSON}", JSON
            )
        encoding = request.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip"):
            return _error(415, f"unsupported Content-Encoding {encoding!r}: send gzip", reply_type)
        try:
            declared = int(request.headers["content-length"])
        except (KeyError, ValueError):
            declared = None
        try:
            body = await read_body(request.stream(), encoding, max_body_bytes, declared)
            spans = span_records(decode_request(body, content_type))
        except OtlpError as error:
            return _error(error.status, error.message, reply_type)
        try:
            if spans:
                on_spans(spans)
                records = request_records(spans)
                if on_requests is not None and records:
                    on_requests(records)
        except ReceiverBusy as busy:
            return _unavailable(str(busy), busy.retry_after_seconds, reply_type)
        except Exception:
            logger.exception("OTLP sink failed on %d spans", len(spans))
            return _unavailable("the receiver could not store the spans; retry", 1, reply_type)
        return Response(_encode(ExportTraceServiceResponse(), reply_type), media_type=reply_type)

    return router


def otlp_app(
    on_spans: Callable[[list[SpanRecord]], None],
    *,
    on_requests: Callable[[list[RequestRecord]], None] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> FastAPI:
    """A standalone ASGI app with only the receiver, for mounting or serving alone."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(
        otlp_router(on_spans, on_requests=on_requests, max_body_bytes=max_body_bytes)
    )
    return app
