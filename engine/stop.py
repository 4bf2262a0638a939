"""When a request is done: EOS, stop token ids, stop strings, max_tokens, max_model_len."""

from __future__ import annotations

from engine.request import Request, RequestStatus


def check_stop(
    request: Request, max_model_len: int, stop_string: str | None = None
) -> RequestStatus | None:
    """The finished status a request reaches with its latest token, or None to go on.

    ``stop_string`` is the stop string the detokenizer found in the text, if any. EOS is
    ignored under ``ignore_eos``; a matched stop token id or string is kept in
    ``request.stop_reason`` (as vLLM reports it).
    """
    params = request.sampling_params
    last = request.output_token_ids[-1]
    if not params.ignore_eos and last in request.eos_token_ids:
        return RequestStatus.FINISHED_STOPPED
    if last in params.stop_token_ids:
        request.stop_reason = last
        return RequestStatus.FINISHED_STOPPED
    if stop_string is not None:
        request.stop_reason = stop_string
        return RequestStatus.FINISHED_STOPPED
    if request.num_output_tokens >= params.max_tokens or request.num_tokens >= max_model_len:
        return RequestStatus.FINISHED_LENGTH
    return None
