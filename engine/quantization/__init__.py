"""Weight quantization: the method names ``--quantization`` takes. No torch here.

One method, with vLLM's name: ``int8_per_channel_weight_only`` (vLLM's online shorthand of
the same meaning): every decoder projection's weight stored as int8 with one float scale per
output channel, activations left in the model's dtype. The torch engine runs it
(``engine.quantization.int8``); the simulator prices it (half the weight bytes of a 16-bit
model, at the GPU spec's speed factor for the kernel). The embeddings and the LM head stay
unquantized, as vLLM leaves them.
"""

from __future__ import annotations

from typing import Any

from engine.errors import ConfigError

INT8_WEIGHT_ONLY = "int8_per_channel_weight_only"
QUANTIZATION_METHODS: tuple[str, ...] = (INT8_WEIGHT_ONLY,)


def check_quantization(value: Any) -> str | None:
    """``value`` if it names a method (None: no quantization); ``ConfigError`` naming the
    knob and the choices otherwise."""
    if value is None or value in QUANTIZATION_METHODS:
        return value
    raise ConfigError(
        f"quantization={value!r}: must be one of {', '.join(QUANTIZATION_METHODS)} "
        "(or unset for the model's own dtype)"
    )
