"""Request bodies of the OpenAI API routes, with the fields this engine serves.

Unknown fields are ignored, as vLLM does, so clients that send more than we use keep
working. Values are checked here, at the edge, so that each error names its field;
``SamplingParams`` checks them again (it is the engine's own contract), with the same
limits (``engine.sampling_params``) and, for ``logit_bias``, the same wording.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.fields import FieldInfo

from engine.safe_text import SURROGATES
from engine.sampling_params import MAX_ABS_PENALTY, MAX_LOGPROBS, logit_bias_value_problem
from engine.server import default_only

# vLLM accepts any int64 seed; torch's generators take no more.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MAX = 2**31 - 1
TokenId = Annotated[int, Field(ge=0)]


class _Body(BaseModel):
    # NOTE: NaN and infinity parse from JSON in Python but mean nothing as knobs.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)
    # the fields accepted only at the value that means off (engine/server/default_only.py)
    default_only_fields: ClassVar[Mapping[str, default_only.DefaultOnly]] = {}

    @field_validator("*", mode="before")
    @classmethod
    def _valid_unicode(cls, value: Any, info: ValidationInfo) -> Any:
        # NOTE: JSON's "\udfff" escape parses into a lone surrogate, which no UTF-8
        # encoder takes (tokenizer, metric labels, spans, our own error bodies): refuse
        # it here, in every string of every field, however deeply nested. A field of
        # request models (messages) is left to theirs, so the error names the inner field.
        if info.field_name is not None and _holds_body(cls.model_fields[info.field_name]):
            return value
        problem = _invalid_unicode(value, "")
        if problem is not None:
            raise ValueError(problem)
        return value

    # NOTE: declared after _valid_unicode so it runs first (pydantic runs "before"
    # validators last-declared first): a field turned on is refused as unsupported
    # before its strings are looked at.
    @field_validator("*", mode="before")
    @classmethod
    def _default_only(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name in cls.default_only_fields:
            return default_only.require_default(cls.default_only_fields, info.field_name, value)
        return value


def _holds_body(field: FieldInfo) -> bool:
    """Whether the field's type has a request model in it (``list[ChatMessage]``)."""
    pending = [field.annotation]
    while pending:
        kind = pending.pop()
        if isinstance(kind, type) and issubclass(kind, _Body):
            return True
        pending.extend(get_args(kind))
    return False


def _invalid_unicode(value: Any, where: str) -> str | None:
    """Where ``value`` holds a lone surrogate, as a message; None if it holds none."""
    if isinstance(value, str):
        found = SURROGATES.search(value)
        if found is None:
            return None
        at = f" in {where}" if where else ""
        return (
            f"invalid Unicode: a lone surrogate U+{ord(found.group()):04X} at character "
            f"{found.start()}{at}; send valid UTF-8 text"
        )
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        if isinstance(key, str) and (problem := _invalid_unicode(key, f"{where} (a key)")):
            return problem
        inner = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}".lstrip(".")
        if (problem := _invalid_unicode(item, inner)) is not None:
            return problem
    return None


class StreamOptions(_Body):
    include_usage: bool = False
    continuous_usage_stats: Any = None  # vLLM's usage on every chunk: not implemented

    default_only_fields = default_only.STREAM_OPTIONS


class GenerationRequest(_Body):
    """Fields shared by chat and text completions."""

    model: str | None = Field(
        None, description="The served model name; omitted means the one model served."
    )
    max_tokens: int | None = Field(None, ge=1, le=INT64_MAX)
    temperature: float | None = Field(None, ge=0.0, description="0 is greedy; default 1.")
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = Field(None, ge=INT64_MIN, le=INT64_MAX)
    stop: str | list[str] | None = Field(None, description="Stop strings, not included.")
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = Field(None, description="End user; the tenant unless X-Tenant is set.")
    n: int = Field(1, ge=1, le=1, description="Choices per request; only 1 is supported.")
    # vLLM's extra sampling fields
    top_k: int | None = Field(None, ge=-1, le=INT32_MAX, description="-1 or 0 disables top-k.")
    ignore_eos: bool = False
    stop_token_ids: list[int] | None = None
    priority: int | None = Field(
        None, ge=INT64_MIN, le=INT64_MAX, description="Lower is served first (priority policy)."
    )
    # sampling as vLLM implements it (OpenAI's ranges)
    presence_penalty: float | None = Field(None, ge=-MAX_ABS_PENALTY, le=MAX_ABS_PENALTY)
    frequency_penalty: float | None = Field(None, ge=-MAX_ABS_PENALTY, le=MAX_ABS_PENALTY)
    logit_bias: dict[int, float] | None = Field(
        None, description="Token id (a string, as JSON keys are) to a bias in [-100, 100]."
    )
    repetition_penalty: float | None = Field(None, gt=0.0, description="vLLM's; 1 is off.")
    min_tokens: int | None = Field(None, ge=0, le=INT64_MAX, description="vLLM's.")
    min_p: float | None = Field(None, ge=0.0, le=1.0, description="vLLM's; 0 is off.")
    # structured outputs, read by engine/server/structured_outputs.py (one per request)
    response_format: Any = Field(
        None,
        description='{"type": "text" | "json_object" | "json_schema", "json_schema": '
        '{"name", "schema", "strict"}}: constrain the output (OpenAI\'s).',
    )
    structured_outputs: Any = Field(
        None,
        description="vLLM's: one of json (a schema), regex, choice, grammar (EBNF), "
        "json_object; and disable_any_whitespace.",
    )
    guided_json: Any = Field(None, description="vLLM's older spelling: a JSON schema.")
    guided_regex: Any = Field(None, description="vLLM's older spelling: a regex.")
    guided_choice: Any = Field(None, description="vLLM's older spelling: a list of strings.")
    guided_grammar: Any = Field(None, description="vLLM's older spelling: an EBNF grammar.")
    # accepted only at the value that means off (engine/server/default_only.py)
    best_of: Any = None
    use_beam_search: Any = None
    prompt_logprobs: Any = None
    allowed_token_ids: Any = None
    bad_words: Any = None
    logits_processors: Any = None
    truncate_prompt_tokens: Any = None
    include_stop_str_in_output: Any = None
    skip_special_tokens: Any = None
    return_tokens_as_token_ids: Any = None
    default_only_fields = default_only.GENERATION

    @property
    def num_logprobs(self) -> int | None:
        """How many top logprobs per token the engine returns (None: no logprobs)."""
        return None

    @field_validator("logit_bias", mode="before")
    @classmethod
    def _token_id_biases(cls, bias: Any) -> Any:
        if bias is None:
            return None
        if not isinstance(bias, dict):
            raise ValueError("must be an object mapping token ids to biases")
        parsed: dict[int, float] = {}
        for key, value in bias.items():
            text = str(key)
            if not text.isascii() or not text.isdigit():
                raise ValueError(f"key {_shown(key)} is not a token id (a non-negative integer)")
            problem = logit_bias_value_problem(int(text), value)
            if problem is not None:
                raise ValueError(problem)
            parsed[int(text)] = float(value)
        return parsed

    @field_validator("n", mode="before")
    @classmethod
    def _one_choice(cls, n: Any) -> Any:
        if _is_int(n) and n != 1:
            raise ValueError(f"n={n}: only one choice per request is supported")
        return n

    @field_validator("stop", mode="before")
    @classmethod
    def _strings(cls, stop: Any) -> Any:
        if stop is None or isinstance(stop, str):
            return stop
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise ValueError("must be a string or a list of strings")
        return stop


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = Field(
        None, description="A string, or a list of {'type': 'text', 'text': ...} parts."
    )
    name: str | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _text_only(cls, content: Any) -> Any:
        if content is None or isinstance(content, str):
            return content
        if not isinstance(content, list):
            raise ValueError("must be a string or a list of text parts")
        for index, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ValueError(f"part {index} is {kind!r}; only text parts are supported")
            if not isinstance(part.get("text"), str):
                raise ValueError(f"part {index} has no 'text' string")
        return content

    @property
    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part["text"] for part in self.content)


class ChatCompletionRequest(GenerationRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(
        None, ge=1, le=INT64_MAX, description="Preferred over max_tokens when both are set."
    )
    logprobs: bool | None = Field(None, description="Return each output token's logprob.")
    top_logprobs: int | None = Field(
        None, ge=0, le=MAX_LOGPROBS, description="Most likely tokens per position; needs logprobs."
    )
    # accepted only at the value that means off (engine/server/default_only.py)
    tools: Any = None
    tool_choice: Any = None
    functions: Any = None
    function_call: Any = None
    audio: Any = None
    modalities: Any = None
    web_search_options: Any = None
    verbosity: Any = None
    echo: Any = None
    add_generation_prompt: Any = None
    continue_final_message: Any = None
    chat_template: Any = None
    chat_template_kwargs: Any = None
    documents: Any = None
    default_only_fields = {**default_only.GENERATION, **default_only.CHAT}

    @field_validator("top_logprobs")
    @classmethod
    def _needs_logprobs(cls, top_logprobs: int | None, info: ValidationInfo) -> int | None:
        # NOTE: OpenAI's and vLLM's rule; logprobs is declared first, so it is in info.data
        if top_logprobs and not info.data.get("logprobs"):
            raise ValueError(f"needs logprobs set to true (got {top_logprobs})")
        return top_logprobs

    @property
    def num_logprobs(self) -> int | None:
        return (self.top_logprobs or 0) if self.logprobs else None

    @property
    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class CompletionRequest(GenerationRequest):
    prompt: (
        Annotated[str, Field(min_length=1)]
        | Annotated[list[TokenId], Field(min_length=1)]
        | Annotated[list[str], Field(min_length=1, max_length=1)]
        | Annotated[list[list[TokenId]], Field(min_length=1, max_length=1)]
    ) = Field(description="A string or a list of token ids (a batch of one is accepted too).")
    logprobs: int | None = Field(
        None, ge=0, le=MAX_LOGPROBS, description="Top logprobs per token (vLLM allows 20)."
    )
    # accepted only at the value that means off (engine/server/default_only.py)
    echo: Any = None
    suffix: Any = None
    default_only_fields = {**default_only.GENERATION, **default_only.COMPLETION}

    @property
    def num_logprobs(self) -> int | None:
        return self.logprobs

    @field_validator("prompt", mode="before")
    @classmethod
    def _single_prompt(cls, prompt: Any) -> Any:
        if isinstance(prompt, list) and prompt and all(isinstance(p, str | list) for p in prompt):
            if len(prompt) != 1:
                raise ValueError(f"a batch of {len(prompt)} prompts: send one prompt per request")
            prompt = prompt[0]
        # NOTE: checked here, before the union, so an error names the prompt, not a branch.
        if prompt == "" or prompt == []:
            raise ValueError("is empty; send at least one character or token id")
        if isinstance(prompt, str):
            return prompt
        if isinstance(prompt, list) and all(_is_int(t) for t in prompt):
            if any(t < 0 for t in prompt):
                raise ValueError("token ids must be >= 0")
            return prompt
        raise ValueError("must be a string or a list of token ids")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
