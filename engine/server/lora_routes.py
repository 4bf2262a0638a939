"""vLLM's runtime LoRA API: ``POST /v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``.

vLLM serves them only with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING`` set, and with no
authentication. Here they are protected as the admin API is: mounted only when LoRA is on
*and* an admin token is configured (``TAILWATCH_ADMIN_TOKEN``), and every call needs
``Authorization: Bearer <token>`` (none: 401, a wrong one: 403) — a load names a path on
the server's disk, which no anonymous caller should probe. An ``openai`` client whose
``api_key`` is the token sends exactly that header.

Bodies and answers are vLLM's: ``{"lora_name", "lora_path", "load_inplace"}`` →
``200 Success: LoRA adapter '<name>' added successfully.`` (plain text);
``{"lora_name"}`` → ``200 Success: LoRA adapter '<name>' removed successfully.``. A name
already served is a 400 (unless ``load_inplace``), an adapter that cannot be served a 400
naming the file and the problem, a path that does not exist or an unknown name to unload a
404 — never a 500.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import PlainTextResponse
from pydantic import Field

from engine.errors import ConfigError
from engine.lora.source import MAX_LORA_NAME_CHARS, LoRANotFoundError, parse_lora_source
from engine.server.admin import require_admin
from engine.server.context import server_context
from engine.server.errors import APIError
from engine.server.protocol import _Body

router = APIRouter(prefix="/v1", dependencies=[Depends(require_admin)])
#: NOTE: a path longer than any file system takes is refused before it reaches one.
MAX_LORA_PATH_CHARS = 4096


class LoadLoRAAdapterRequest(_Body):
    lora_name: str | None = Field(None, max_length=MAX_LORA_NAME_CHARS)
    lora_path: str | None = Field(
        None,
        max_length=MAX_LORA_PATH_CHARS,
        description="A local PEFT adapter directory, or random:rank=R[,seed=S] (a demo).",
    )
    load_inplace: bool = Field(False, description="Replace an adapter served under this name.")


class UnloadLoRAAdapterRequest(_Body):
    lora_name: str | None = Field(None, max_length=MAX_LORA_NAME_CHARS)
    lora_int_id: int | None = Field(None, description="Ignored, as vLLM ignores it here.")


@router.post("/load_lora_adapter", response_class=PlainTextResponse)
async def load_lora_adapter(body: LoadLoRAAdapterRequest, request: Request) -> str:
    context = server_context(request)
    if not body.lora_name or not body.lora_path:
        raise APIError(400, "Both 'lora_name' and 'lora_path' must be provided.")
    if body.lora_name == context.served_model_name:
        raise APIError(
            400,
            f"lora_name={body.lora_name!r}: names the base model; pick another name",
            param="lora_name",
        )
    engine = context.async_engine
    if not body.load_inplace and engine.engine.resolve_lora(body.lora_name) is not None:
        raise APIError(
            400,
            f"The lora adapter '{body.lora_name}' has already been loaded. If you want to "
            "load the adapter in place, set 'load_inplace' to True.",
            param="lora_name",
        )
    try:
        source = parse_lora_source(body.lora_path)
        await engine.add_lora(body.lora_name, source, replace=body.load_inplace)
    except LoRANotFoundError as error:
        raise APIError(404, str(error), param="lora_path", code="lora_not_found") from None
    except ConfigError as error:
        message = str(error)
        param = "lora_name" if message.startswith("lora_name=") else "lora_path"
        raise APIError(400, message, param=param) from None
    return f"Success: LoRA adapter '{body.lora_name}' added successfully."


@router.post("/unload_lora_adapter", response_class=PlainTextResponse)
async def unload_lora_adapter(body: UnloadLoRAAdapterRequest, request: Request) -> str:
    if not body.lora_name:
        raise APIError(400, "'lora_name' needs to be provided to unload a LoRA adapter.")
    if not await server_context(request).async_engine.remove_lora(body.lora_name):
        raise APIError(
            404,
            f"The lora adapter '{body.lora_name}' cannot be found.",
            param="lora_name",
            code="lora_not_found",
        )
    return f"Success: LoRA adapter '{body.lora_name}' removed successfully."
