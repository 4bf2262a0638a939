"""The names of the SLI recording rules ``tailwatch rules export`` writes, which the
evaluator reads back where the server evaluates them (:func:`recorded_error_ratios`): one
vocabulary for the writer and the reader, so a record cannot be written under one name and
looked for under another.

``tailwatch:slo_<name>:error_ratio_rate<w>{slo="<name>"}`` is an SLO's error ratio over the
window ``w`` (Sloth's ``ratio_rate<w>``). A latency SLO's record also carries
``threshold_seconds``: the evaluator reads a record only when that is its SLO's threshold
now, so a rule file exported before the objective changed is not read as the new one.
"""

from __future__ import annotations

import math

from alerts.rules.sli import SLI, LatencySLI

#: The prefix of every name Tailwatch records.
PREFIX = "tailwatch:"
#: The label of a latency SLO's record that says its threshold.
THRESHOLD_LABEL = "threshold_seconds"


def metric_token(text: str) -> str:
    """``text`` as a piece of a metric name (``[a-zA-Z0-9_]``)."""
    return "".join(ch if ch.isalnum() and ch.isascii() else "_" for ch in text)


def prom_duration(seconds: float) -> str:
    """Seconds as a Prometheus duration: ``300`` → ``5m``, ``5400`` → ``1h30m``, ``1.5`` →
    ``1s500ms``. Raises ``ValueError`` for a duration that is not positive or finite, or not a
    whole number of milliseconds."""
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"a window must be a positive number of seconds, got {seconds!r}")
    millis = round(seconds * 1000)
    if abs(millis - seconds * 1000) > 1e-6 * max(1.0, seconds * 1000):
        raise ValueError(f"{seconds!r} s is not a whole number of milliseconds")
    text = ""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        count, millis = divmod(millis, size)
        if count:
            text += f"{count}{unit}"
    return text + (f"{millis}ms" if millis else "")


def slo_record_name(slo: str, window_seconds: float) -> str:
    """The record of ``slo``'s error ratio over ``window_seconds``."""
    return f"{PREFIX}slo_{metric_token(slo)}:error_ratio_rate{prom_duration(window_seconds)}"


def threshold_text(seconds: float) -> str:
    """A latency threshold as the record's ``threshold_seconds`` label (Go's float text)."""
    from prometheus_client.utils import floatToGoString

    return floatToGoString(seconds)


def slo_record_labels(slo: str, sli: SLI) -> dict[str, str]:
    """The labels of ``slo``'s records: ``slo``, and a latency SLO's threshold."""
    labels = {"slo": slo}
    if isinstance(sli, LatencySLI):
        labels[THRESHOLD_LABEL] = threshold_text(sli.threshold_seconds)
    return labels
