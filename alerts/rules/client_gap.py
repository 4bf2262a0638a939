"""The client-gap rule kind: first tokens slower for the clients, not for the engines.

Per model: the ``quantile`` of the clients' TTFT (``client_ttft_seconds``: a gateway's or the
load generator's) over the window is more than ``rise_min`` times its median over the
baseline window before it, while the engines' own TTFT quantile over the same window is at
most ``server_rise_max`` times its baseline median. The time was added between the engines
and the clients: a saturated proxy or router, a hop or a region added in front.

A constant overhead (a proxy's few milliseconds, there in the baseline too) never fires:
the client's tail rose only against its own past. An engine incident never fires either:
the engines' TTFT rose with the clients', and the engine rules own it. Both families need
``min_observations`` in the window and in enough baseline windows; a fleet with no client
timings has no client series, so the rule has nothing to evaluate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from alerts.errors import RuleError
from alerts.rules.base import MAX_DURATION_SECONDS, Rule, check_number
from collectors import canonical as c


@dataclass(frozen=True, kw_only=True)
class ClientGapRule(Rule):
    """See the module docstring."""

    kind: ClassVar[str] = "client-gap"

    quantile: float = 0.95
    rise_min: float = 1.5
    server_rise_max: float = 1.2
    min_observations: float = 100.0
    window_seconds: float = 300.0
    baseline_window_seconds: float = 3600.0

    def check(self) -> None:
        check_number(self.name, "quantile", self.quantile, low=0.5, high=1, low_open=True, high_open=True)  # fmt: skip
        check_number(self.name, "rise_min", self.rise_min, low=1, low_open=True)
        check_number(self.name, "server_rise_max", self.server_rise_max, low=1)
        if self.server_rise_max >= self.rise_min:
            raise RuleError(
                self.name,
                "server_rise_max",
                f"must be below rise_min ({self.rise_min:g}): a client tail that rose no more "
                "than the engines' is the engines' incident",
            )
        check_number(self.name, "min_observations", self.min_observations)
        for name in ("window_seconds", "baseline_window_seconds"):
            check_number(
                self.name,
                name,
                getattr(self, name),
                low=0,
                low_open=True,
                high=MAX_DURATION_SECONDS,
            )

    @property
    def is_relative(self) -> bool:
        return True

    def families(self) -> tuple[str, ...]:
        return (c.CLIENT_TTFT_SECONDS, c.TTFT_SECONDS)

    def template_values(self) -> dict[str, object]:
        """Adds ``percentile`` (``p95``) and ``condition``: the two conditions, in words."""
        values = super().template_values()
        percentile = f"p{self.quantile * 100:g}"
        condition = (
            f"the clients' TTFT {percentile} above {self.rise_min:g}x its "
            f"{values['baseline_window']} baseline while the engines' stays within "
            f"{self.server_rise_max:g}x theirs"
        )
        return {**values, "percentile": percentile, "condition": condition}
