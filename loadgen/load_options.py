"""Load options as a person types them, read into what loadgen runs: the text of a command
line option or a console form field (``128``, ``uniform:8:64``, ``1,2.5,4``, ``a=3,b=1``,
``chat``, a server URL) into lengths, rates, weights, a workload, a route and a checked URL.
Every mistake is a ``WorkloadError`` or ``ValueError`` naming the option, so ``tailwatch load``,
``tailwatch sweep``, ``tailwatch replay`` and the console's lab forms report it alike."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from collectors.urls import url_problem
from loadgen.client import CHAT, COMPLETIONS
from loadgen.errors import WorkloadError
from loadgen.workload import Workload, parse_workload

#: The highest TCP port a URL may name.


def options_with_defaults(
    command: str, defaults: Mapping[str, Any], given: Mapping[str, Any], required: frozenset[str]
) -> dict[str, Any]:
    """``defaults`` (each option of ``tailwatch <command>`` that a plan is built from, at the
    command's default) with ``given`` over them, so a console form builds a plan (and its
    errors) exactly as the command does; a ``ValueError`` for a name that is neither one of
    ``defaults`` nor ``required``."""
    unknown = set(given) - set(defaults) - required
    if unknown:
        raise ValueError(f"not options of tailwatch {command}: {sorted(unknown)}")
    return {**defaults, **given}


def check_url(url: str, flag: str) -> str:
    """``url`` if it is an http(s) URL with a host and, when it names one, a port 1-65535;
    else a ``ValueError`` naming ``flag`` and the URL (before any connection is tried)."""
    problem = url_problem(url)
    if problem is not None:
        raise ValueError(f"{flag}: {problem}")
    return url


def parse_length_option(text: str, flag: str = "length") -> Any:
    """``128`` | ``uniform:MIN:MAX`` | ``lognormal:MEDIAN:SIGMA:MAX`` → a length mapping;
    a mistake names ``flag``."""
    kind, *params = text.split(":")
    try:
        if not params:
            return int(kind)
        if kind == "uniform" and len(params) == 2:
            return {"kind": "uniform", "min": int(params[0]), "max": int(params[1])}
        if kind == "lognormal" and len(params) == 3:
            median, sigma, most = float(params[0]), float(params[1]), int(params[2])
            return {"kind": "lognormal", "median": median, "sigma": sigma, "max": most}
    except ValueError:
        pass
    raise WorkloadError(
        flag, f"{text!r}: expected N, uniform:MIN:MAX or lognormal:MEDIAN:SIGMA:MAX"
    )


def parse_rates_option(text: str) -> list[float]:
    """``"1,2.5,4"`` → rates per second; each must be a finite number > 0."""
    rates = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            rate = float(part)
        except ValueError:
            raise WorkloadError("--rates", f"{part!r} is not a number (in {text!r})") from None
        if not (rate > 0 and math.isfinite(rate)):
            raise WorkloadError("--rates", f"{part!r}: a rate must be a finite number > 0")
        rates.append(rate)
    return rates


def parse_weights_option(text: str, what: str) -> dict[str, float]:
    """``"a=3,b=1"`` (a bare name weighs 1) → weights by name; a mistake names ``what``."""
    weights: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, weight = part.partition("=")
        try:
            weights[name.strip()] = float(weight) if sep else 1.0
        except ValueError:
            raise WorkloadError(what, f"{part!r}: expected NAME=WEIGHT") from None
    return weights


def workload_from_options(
    rate: float,
    duration: float,
    arrivals: str,
    burstiness: float,
    prompt_tokens: str,
    output_tokens: str,
    replay: Path | str | None,
    prefix_groups: int,
    prefix_share: float,
    prefix_tokens: int,
    tenants: str,
    priorities: str,
    seed: int,
) -> Workload:
    """The workload the traffic options of ``tailwatch load run|sweep`` and ``tailwatch sweep``
    describe (checked by ``parse_workload``)."""
    raw: dict[str, Any] = {
        "rate": rate,
        "duration": duration,
        "arrivals": arrivals,
        "burstiness": burstiness,
        "prompt_tokens": parse_length_option(prompt_tokens, "--prompt-tokens"),
        "output_tokens": parse_length_option(output_tokens, "--output-tokens"),
        "prefix": {"groups": prefix_groups, "share": prefix_share, "tokens": prefix_tokens},
        "tenants": parse_weights_option(tenants, "tenants"),
        "priorities": parse_weights_option(priorities, "priorities"),
        "seed": seed,
    }
    if replay is not None:
        raw["replay"] = str(replay)
    return parse_workload(raw)


def endpoint_route(endpoint: str) -> str:
    """``--endpoint`` (``completions`` or ``chat``) as the API path requests go to."""
    routes = {"completions": COMPLETIONS, "chat": CHAT}
    if endpoint not in routes:
        raise WorkloadError("endpoint", f"must be completions or chat, got {endpoint!r}")
    return routes[endpoint]
