"""The OpenAI API: ``/v1/chat/completions``, ``/v1/completions`` and ``/v1/models``."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from engine.async_engine import RequestHandle, RequestStream
from engine.errors import RequestError
from engine.lora.request import LoRARequest
from engine.outputs import RequestOutput, TokenLogprobs
from engine.sampling_params import SamplingParams
from engine.server import responses
from engine.server.chat_template import render_chat_prompt
from engine.server.context import ServerContext, server_context
from engine.server.disconnect import collect_unless_disconnected
from engine.server.errors import APIError
from engine.server.protocol import (
    INT64_MAX,
    INT64_MIN,
    ChatCompletionRequest,
    CompletionRequest,
    GenerationRequest,
)
from engine.server.responses import ResponseMeta
from engine.server.sse import EngineStreamingResponse, sse_body
from engine.server.structured_outputs import Constraint, structured_outputs_of

# "Client closed request" (nginx's code): the client left before its response was ready.
CLIENT_CLOSED_REQUEST = 499

router = APIRouter()


@dataclass(frozen=True)
class Admission:
    """Who the request is accounted to (None: no tenant) and its scheduling priority."""

    tenant: str | None
    priority: int


ChunkStream = Callable[[ResponseMeta, AsyncIterator[RequestOutput]], AsyncIterator[dict]]
FinalBody = Callable[[ResponseMeta, str, RequestOutput, list[TokenLogprobs]], dict[str, Any]]


@router.get("/v1/models")
async def list_models(request: Request) -> dict[str, Any]:
    """The base model, then each served LoRA adapter with ``parent`` the base (vLLM's
    cards: an adapter's ``root`` is its path)."""
    context = server_context(request)
    engine = context.async_engine.engine
    model = {
        "id": context.served_model_name,
        "object": "model",
        "created": context.created,
        "owned_by": "tailwatch",
        "root": engine.config.model,
        "parent": None,
        "max_model_len": context.max_model_len,
    }
    adapters = [
        {
            "id": lora.lora_name,
            "object": "model",
            "created": context.created,
            "owned_by": "tailwatch",
            "root": lora.lora_path,
            "parent": context.served_model_name,
            "max_model_len": context.max_model_len,
        }
        for lora in (engine.lora or ())
    ]
    return {"object": "list", "data": [model, *adapters]}


def resolve_model(context: ServerContext, model: str | None) -> LoRARequest | None:
    """The adapter a request's ``model`` selects (None: the base model); a 404
    ``model_not_found`` naming what is served for a name that is neither."""
    if model is None or model == context.served_model_name:
        return None
    lora_request = context.async_engine.engine.resolve_lora(model)
    if lora_request is not None:
        return lora_request
    adapters = context.async_engine.engine.lora
    served = f"{context.served_model_name!r}"
    if adapters is not None and len(adapters.registry):
        served += " or one of its LoRA adapters"
    raise APIError(
        404,
        f"The model `{model}` does not exist; this server serves {served} (see GET /v1/models)",
        param="model",
        code="model_not_found",
    )


TenantHeader = Annotated[
    str | None,
    Header(description="The tenant the request is accounted to; wins over the body's user."),
]
PriorityHeader = Annotated[
    int | None,
    Header(
        ge=INT64_MIN,
        le=INT64_MAX,
        description="Scheduling priority (lower first, with --scheduling-policy priority); "
        "wins over the body's priority.",
    ),
]


@router.post("/v1/chat/completions")
async def create_chat_completion(
    body: ChatCompletionRequest,
    request: Request,
    x_tenant: TenantHeader = None,
    x_priority: PriorityHeader = None,
) -> Response:
    context = server_context(request)
    prompt_ids = context.async_engine.engine.tokenizer.encode(render_chat_prompt(body.messages))
    # NOTE: as in vLLM and OpenAI, an unset limit means "up to the context length".
    max_tokens = body.requested_max_tokens or max(1, context.max_model_len - len(prompt_ids))
    admission = Admission(_tenant(x_tenant, body), _priority(x_priority, body))
    return await _serve(
        context, request, body, prompt_ids, max_tokens, admission, "chat", "chatcmpl",
        _chat_chunks, responses.chat_completion,
    )  # fmt: skip


@router.post("/v1/completions")
async def create_completion(
    body: CompletionRequest,
    request: Request,
    x_tenant: TenantHeader = None,
    x_priority: PriorityHeader = None,
) -> Response:
    context = server_context(request)
    max_tokens = body.max_tokens or 16  # OpenAI's default for completions
    admission = Admission(_tenant(x_tenant, body), _priority(x_priority, body))
    return await _serve(
        context, request, body, body.prompt, max_tokens, admission, "text_completion", "cmpl",
        _text_chunks, responses.text_completion,
    )  # fmt: skip


async def _serve(
    context: ServerContext,
    request: Request,
    body: GenerationRequest,
    prompt: str | list[int],
    max_tokens: int,
    admission: Admission,
    operation: str,
    id_prefix: str,
    chunks: ChunkStream,
    final_body: FinalBody,
) -> Response:
    lora_request = resolve_model(context, body.model)
    if body.stream_options is not None and not body.stream:
        raise APIError(
            400, "stream_options: only allowed when stream is true", param="stream_options"
        )
    constraint = structured_outputs_of(body)
    params = _sampling_params(body, max_tokens, constraint)
    if constraint is not None:
        await _check_constraint(context, constraint)
    meta = ResponseMeta(
        response_id=f"{id_prefix}-{uuid.uuid4().hex}",
        created=int(time.time()),
        model=context.served_model_name if lora_request is None else lora_request.lora_name,
        include_usage=bool(body.stream_options and body.stream_options.include_usage),
        decode_token=_token_decoder(context) if params.logprobs is not None else None,
    )
    attributes = _trace_attributes(request, body)
    if lora_request is not None:
        attributes["tailwatch.lora.name"] = lora_request.lora_name

    def on_admitted(handle: RequestHandle) -> None:
        context.tracer.start_request(handle, request.headers, operation, attributes)

    stream = context.async_engine.submit(
        prompt,
        params,
        request_id=meta.response_id,
        tenant=admission.tenant,
        priority=admission.priority,
        on_admitted=on_admitted,
        lora_request=lora_request,
    )
    traced = _traced_outputs(context, stream)
    if body.stream:
        return EngineStreamingResponse(sse_body(chunks(meta, traced)), stream)
    outputs = await collect_unless_disconnected(request, stream, traced)
    if outputs is None:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    last = outputs[-1]
    if last.finish_reason == "abort":
        raise APIError(503, "the server is shutting down and aborted the request", code="aborted")
    text = "".join(output.new_text for output in outputs)
    logprobs = [lp for output in outputs for lp in output.new_logprobs]
    return JSONResponse(final_body(meta, text, last, logprobs))


async def _traced_outputs(
    context: ServerContext, stream: RequestStream
) -> AsyncIterator[RequestOutput]:
    """The stream's outputs; an engine failure after admission also ends the span."""
    try:
        async for output in stream:
            yield output
    except Exception as error:
        context.tracer.fail_request(stream.handle, type(error).__name__, str(error))
        raise


async def _chat_chunks(
    meta: ResponseMeta, outputs: AsyncIterator[RequestOutput]
) -> AsyncIterator[dict]:
    last = None
    # NOTE: logprobs of tokens whose text is still held back ride on the next chunk
    pending: list[TokenLogprobs] = []
    async for output in outputs:
        if last is None:  # vLLM and OpenAI open with the role, empty content
            yield responses.chat_chunk(meta, {"role": "assistant", "content": ""})
        last = output
        pending.extend(output.new_logprobs)
        if output.new_text or output.finished:
            delta = {"content": output.new_text} if output.new_text else {}
            logprobs = responses.chat_logprobs(meta, pending)
            pending = []
            yield responses.chat_chunk(meta, delta, output.finish_reason, logprobs)
    if meta.include_usage and last is not None:
        yield responses.usage_chunk(meta, "chat.completion.chunk", last)


async def _text_chunks(
    meta: ResponseMeta, outputs: AsyncIterator[RequestOutput]
) -> AsyncIterator[dict]:
    last = None
    pending: list[TokenLogprobs] = []
    text_offset = 0
    async for output in outputs:
        last = output
        pending.extend(output.new_logprobs)
        if output.new_text or output.finished:
            logprobs, text_offset = responses.completion_logprobs(meta, pending, text_offset)
            pending = []
            yield responses.text_chunk(meta, output.new_text, output.finish_reason, logprobs)
    if meta.include_usage and last is not None:
        yield responses.usage_chunk(meta, "text_completion", last)


async def _check_constraint(context: ServerContext, constraint: Constraint) -> None:
    """A 400 naming the request's structured-output field if its constraint does not parse.
    Off the event loop: the first structured request imports xgrammar (seconds)."""
    try:
        await run_in_threadpool(
            context.async_engine.engine.structured_outputs.check, constraint.params
        )
    except RequestError as error:
        why = str(error).split(": ", 1)[-1]
        raise APIError(400, f"{constraint.field}: {why}", param=constraint.field) from None


def _sampling_params(
    body: GenerationRequest, max_tokens: int, constraint: Constraint | None = None
) -> SamplingParams:
    # NOTE: a temperature below 1e-5 is greedy in SamplingParams (vLLM's rule).
    temperature = 1.0 if body.temperature is None else body.temperature
    stop = body.stop if body.stop is not None else ()
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=1.0 if body.top_p is None else body.top_p,
        top_k=body.top_k or 0,
        seed=body.seed,
        stop=(stop,) if isinstance(stop, str) else tuple(stop),
        stop_token_ids=tuple(body.stop_token_ids or ()),
        ignore_eos=body.ignore_eos,
        presence_penalty=body.presence_penalty or 0.0,
        frequency_penalty=body.frequency_penalty or 0.0,
        repetition_penalty=1.0 if body.repetition_penalty is None else body.repetition_penalty,
        logit_bias=body.logit_bias or {},
        min_tokens=body.min_tokens or 0,
        min_p=body.min_p or 0.0,
        logprobs=body.num_logprobs,
        structured_outputs=None if constraint is None else constraint.params,
    )


def _token_decoder(context: ServerContext) -> Callable[[int], str]:
    tokenizer = context.async_engine.engine.tokenizer
    return lambda token_id: tokenizer.decode([token_id])


def _tenant(header: str | None, body: GenerationRequest) -> str | None:
    if header:
        # NOTE: Starlette decodes header bytes as latin-1; a client that sends its tenant
        # name as UTF-8 (every HTTP library does) means the UTF-8 text.
        try:
            return header.encode("latin-1").decode("utf-8")
        except UnicodeError:
            return header
    return body.user or None


def _priority(header: int | None, body: GenerationRequest) -> int:
    if header is not None:
        return header
    return body.priority or 0


def _trace_attributes(request: Request, body: GenerationRequest) -> dict[str, Any]:
    server = request.scope.get("server") or (None, None)
    return {
        "gen_ai.request.stream": True if body.stream else None,
        "gen_ai.request.top_k": float(body.top_k) if body.top_k else None,
        "server.address": server[0],
        "server.port": server[1],
    }
