"""A mixture-of-experts layer in a simulated shape: how many experts, and how many each
token is routed to.

The decoder's ``ModelConfig`` stays dense: an MoE shape is that config with
``intermediate_size`` the size of *one* expert's MLP, plus ``Experts``. So the KV sizing
(attention is unchanged by experts) is the engine's own ``ModelConfig.kv_bytes_per_token``,
and only the MLP's weights and traffic are multiplied here.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ConfigError
from engine.model.config import ModelConfig


@dataclass(frozen=True)
class Experts:
    """``num_local_experts`` MLPs per layer, ``num_experts_per_tok`` of them per token
    (Hugging Face's ``config.json`` names), and a router of ``E x hidden`` weights."""

    num_local_experts: int
    num_experts_per_tok: int

    def __post_init__(self) -> None:
        for name in ("num_local_experts", "num_experts_per_tok"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}={value!r}: must be a positive integer")
        if self.num_experts_per_tok > self.num_local_experts:
            raise ConfigError(
                f"num_experts_per_tok={self.num_experts_per_tok}: must be at most "
                f"num_local_experts ({self.num_local_experts})"
            )

    def expected_distinct_experts(self, num_tokens: int) -> float:
        """Experts of one layer that ``num_tokens`` tokens touch, in expectation:
        ``E * (1 - (1 - k/E)^T)`` — ``k`` at one token, ``E`` as ``T`` grows.

        NOTE: it assumes each token's k experts are a uniform draw, independent of every
        other token's. A trained router is neither uniform nor independent (tokens of one
        sequence favour the same experts), so a real step touches fewer experts than this
        at small T and is slowed by the busiest expert at large T; neither is modelled.
        """
        if num_tokens <= 0:
            return 0.0
        miss = 1.0 - self.num_experts_per_tok / self.num_local_experts
        return self.num_local_experts * (1.0 - miss**num_tokens)

    def mlp_parameters(self, shape: ModelConfig) -> int:
        """One expert's gate, up and down projections in one layer."""
        return 3 * shape.hidden_size * shape.intermediate_size

    def router_parameters(self, shape: ModelConfig) -> int:
        """One layer's router (gate) weights: a ``hidden x E`` linear."""
        return shape.hidden_size * self.num_local_experts

    def total_parameters(self, shape: ModelConfig) -> int:
        """All parameters: the dense skeleton (which counts one expert a layer) plus the
        other ``E - 1`` experts and the router of every layer."""
        extra = (self.num_local_experts - 1) * self.mlp_parameters(shape)
        extra += self.router_parameters(shape)
        return shape.num_parameters() + shape.num_hidden_layers * extra

    def active_parameters(self, shape: ModelConfig) -> int:
        """Parameters one token's forward uses: the router and ``k`` of the ``E`` experts."""
        extra = (self.num_experts_per_tok - 1) * self.mlp_parameters(shape)
        extra += self.router_parameters(shape)
        return shape.num_parameters() + shape.num_hidden_layers * extra
