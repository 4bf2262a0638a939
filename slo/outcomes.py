"""Which request outcomes count against availability, and the error ratio from counters.

An :class:`~slo.ErrorRatioIndicator` reads one counter family, split by one label, and each
label value is an :class:`Outcome`:

=========================  ==========================================  =====================
outcome                    ``finished_reason`` (requests)              ``code`` (HTTP)
=========================  ==========================================  =====================
``GOOD``                   stop, length, repetition; success (TGI,     1xx-4xx, except 429
                           Dynamo: coarse flag)                        and 499
``ERROR``                  error                                       5xx (503 included)
``LOAD_SHED``              rejected (bundled engine, at admission)     429
``ABORTED``                abort                                       499 (client closed)
``UNRECOGNISED``           anything else, e.g. "" (SGLang: no reason)  not a code 100-599
=========================  ==========================================  =====================

Errors are bad; good is good; load shedding is bad unless ``count_load_shedding`` is off and
aborts are left out unless ``count_aborts`` is on (why: :class:`~slo.ErrorRatioIndicator`).
Left out means neither good nor bad: a 429 not counted must not dilute the ratio either.

NOTE: 4xx other than 429/499 count as good, as in Sloth's and Pyrra's examples: the server
answered a malformed request correctly. A 503 is always an error: the bundled engine sends it
when draining or dead, which is the server being unavailable, not deliberate shedding.

NOTE: what a source cannot see stays unseen. TGI's coarse flag folds every failure (its ``err``:
overloaded, validation, ...) into ``error``, so there ``count_load_shedding`` has nothing to act
on and a malformed request counts as an error;
vLLM counts finished requests only, so its HTTP-level refusals are not in ``requests``.

Unrecognised values are left out and *reported* (:attr:`ErrorRatioResult.unrecognised`), so a
new finished reason after an engine upgrade shows up instead of silently moving the ratio.

Inputs are counter increases over one window keyed by label value, e.g. what
``MetricsReader`` gives for ``requests_total`` grouped by ``finished_reason``; plain numbers,
so this is tested without a store.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from slo.errors import SLOError
from slo.indicators import ErrorRatioIndicator, ErrorSource


class Outcome(enum.Enum):
    """What one label value of a request counter says about those requests."""

    GOOD = "good"
    ERROR = "error"
    LOAD_SHED = "load_shed"
    ABORTED = "aborted"
    UNRECOGNISED = "unrecognised"


#: ``finished_reason`` values across the dialects (``collectors/dialect_rules.py``): vLLM and
#: TensorRT-LLM's reasons, the bundled engine's ``rejected``, TGI's and Dynamo's coarse flag.
FINISHED_REASON_OUTCOMES: Mapping[str, Outcome] = MappingProxyType(
    {
        "stop": Outcome.GOOD,
        "length": Outcome.GOOD,
        "repetition": Outcome.GOOD,
        "success": Outcome.GOOD,
        "error": Outcome.ERROR,
        "abort": Outcome.ABORTED,
        "rejected": Outcome.LOAD_SHED,
    }
)
HTTP_TOO_MANY_REQUESTS = 429
HTTP_CLIENT_CLOSED_REQUEST = 499  # nginx's, and the bundled engine's when a client goes away
_HTTP_CODE = re.compile(r"[1-5][0-9][0-9]")


def finished_reason_outcome(reason: str) -> Outcome:
    """The outcome of a ``finished_reason`` label value (exact, case-sensitive match)."""
    return FINISHED_REASON_OUTCOMES.get(reason, Outcome.UNRECOGNISED)


def http_code_outcome(code: str) -> Outcome:
    """The outcome of an HTTP status ``code`` label value such as ``"503"``."""
    if not _HTTP_CODE.fullmatch(code):
        return Outcome.UNRECOGNISED
    status = int(code)
    if status == HTTP_TOO_MANY_REQUESTS:
        return Outcome.LOAD_SHED
    if status == HTTP_CLIENT_CLOSED_REQUEST:
        return Outcome.ABORTED
    return Outcome.ERROR if status >= 500 else Outcome.GOOD


def outcome(value: str, source: ErrorSource) -> Outcome:
    """The outcome of one label value of ``source``'s counter."""
    if source is ErrorSource.REQUESTS:
        return finished_reason_outcome(value)
    return http_code_outcome(value)


@dataclass(frozen=True)
class ErrorRatioResult:
    """Requests over one window, sorted by what they mean for the budget.

    ``num_bad / num_valid`` is the error ratio; ``num_left_out`` are requests the indicator
    does not count (aborts, and load shedding when not counted); ``unrecognised`` maps each
    label value no rule knows to its increase (also left out, and not in ``num_left_out``).
    """

    num_bad: float
    num_valid: float
    num_left_out: float
    unrecognised: Mapping[str, float]

    @property
    def error_ratio(self) -> float:
        """``bad / valid``; NaN without valid requests (no traffic never fires an alert)."""
        return self.num_bad / self.num_valid if self.num_valid else math.nan


def error_ratio_from_increases(
    increases: Mapping[str, float], indicator: ErrorRatioIndicator
) -> ErrorRatioResult:
    """Classify counter increases keyed by label value (``finished_reason`` or ``code``, per
    ``indicator.source``) and total them. Increases may be fractional (PromQL-style
    extrapolation). Raises :class:`SLOError` naming the value for a non-string key or an
    increase that is negative, NaN or infinite.
    """
    counted = {
        Outcome.GOOD: True,
        Outcome.ERROR: True,
        Outcome.LOAD_SHED: indicator.count_load_shedding,
        Outcome.ABORTED: indicator.count_aborts,
    }
    num_good = num_bad = num_left_out = 0.0
    unrecognised: dict[str, float] = {}
    for value, increase in increases.items():
        if not isinstance(value, str):
            raise SLOError(f"label values must be strings, got {value!r}")
        if isinstance(increase, bool) or not isinstance(increase, int | float):
            raise SLOError(f"the increase for {value!r} must be a number, got {increase!r}")
        if not (math.isfinite(increase) and increase >= 0):
            raise SLOError(
                f"the increase for {value!r} must be finite and >= 0 (a counter's increase), "
                f"got {increase}"
            )
        kind = outcome(value, indicator.source)
        if kind is Outcome.UNRECOGNISED:
            unrecognised[value] = unrecognised.get(value, 0.0) + increase
        elif not counted[kind]:
            num_left_out += increase
        elif kind is Outcome.GOOD:
            num_good += increase
        else:
            num_bad += increase
    return ErrorRatioResult(
        num_bad, num_good + num_bad, num_left_out, MappingProxyType(unrecognised)
    )


def error_ratios_by_window(
    increases_by_window: Mapping[float, Mapping[str, float]], indicator: ErrorRatioIndicator
) -> dict[float, float]:
    """``{window_seconds: error ratio}``, the input :func:`slo.evaluate_burn_rates` takes."""
    return {
        window: error_ratio_from_increases(increases, indicator).error_ratio
        for window, increases in increases_by_window.items()
    }
