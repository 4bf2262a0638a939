"""The exact JSON text the alert-state tables hold (``*_json`` columns) and the plain copies
beside it: alerts, silences and rule failures round-trip exactly (any Unicode, NUL, NaN)."""

from __future__ import annotations

import json
from typing import Any

from alerts.labels import LabelSet
from alerts.matchers import Matcher, MatchType
from alerts.model import Alert, AlertState
from alerts.rule_errors import RuleFailure
from alerts.silences import Silence

#: ``String(255)``: the length of the plain ``alertname`` and silence ``id`` copies.
KEY_LENGTH = 255


def plain_text(text: str, length: int | None = KEY_LENGTH) -> str:
    """The copy of ``text`` a plain column holds: NUL as U+FFFD, clipped to ``length``."""
    cleaned = text.replace("\x00", "\ufffd")
    return cleaned if length is None else cleaned[:length]


def _dumps(value: Any) -> str:
    # NOTE: ensure_ascii=False keeps text readable; json still escapes control characters
    # (NUL is ``\u0000``), and writes NaN and infinities as Python's json reads them back.
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def encode_alert(alert: Alert) -> str:
    return _dumps(
        {
            "labels": alert.labels.as_dict(),
            "annotations": alert.annotations.as_dict(),
            "state": alert.state.value,
            "active_at_seconds": alert.active_at_seconds,
            "started_at_seconds": alert.started_at_seconds,
            "ended_at_seconds": alert.ended_at_seconds,
            "value": alert.value,
            "generator_url": alert.generator_url,
            "keep_firing_since_seconds": alert.keep_firing_since_seconds,
            "cause": alert.cause,
            "cause_scope": alert.cause_scope,
            "incident_group": alert.incident_group,
        }
    )


def decode_alert(text: str) -> Alert:
    data = json.loads(text)
    return Alert(
        labels=LabelSet(data["labels"], "labels"),
        state=AlertState(data["state"]),
        annotations=LabelSet(data["annotations"], "annotations"),
        active_at_seconds=data["active_at_seconds"],
        started_at_seconds=data["started_at_seconds"],
        ended_at_seconds=data["ended_at_seconds"],
        value=data["value"],
        generator_url=data["generator_url"],
        keep_firing_since_seconds=data["keep_firing_since_seconds"],
        # NOTE: absent from alerts stored before incidents were grouped
        cause=data.get("cause", ""),
        cause_scope=data.get("cause_scope", ""),
        incident_group=data.get("incident_group", ""),
    )


def encode_silence(silence: Silence) -> str:
    return _dumps(
        {
            "id": silence.id,
            # NOTE: [name, operator, value] rather than the text form: exact for any value.
            "matchers": [[m.name, m.type.value, m.value] for m in silence.matchers],
            "starts_at_seconds": silence.starts_at_seconds,
            "ends_at_seconds": silence.ends_at_seconds,
            "created_by": silence.created_by,
            "comment": silence.comment,
        }
    )


def decode_silence(text: str) -> Silence:
    data = json.loads(text)
    return Silence(
        id=data["id"],
        matchers=tuple(Matcher(n, MatchType(t), v) for n, t, v in data["matchers"]),
        starts_at_seconds=data["starts_at_seconds"],
        ends_at_seconds=data["ends_at_seconds"],
        created_by=data["created_by"],
        comment=data["comment"],
    )


def encode_failure(failure: RuleFailure) -> str:
    return _dumps(
        {
            "rule": failure.rule,
            "error_type": failure.error_type,
            "message": failure.message,
            "first_failed_seconds": failure.first_failed_seconds,
            "last_failed_seconds": failure.last_failed_seconds,
            "num_failures": failure.num_failures,
        }
    )


def decode_failure(text: str) -> RuleFailure:
    return RuleFailure(**json.loads(text))
