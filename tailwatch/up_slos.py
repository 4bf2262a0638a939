"""``tailwatch up`` with no ``slos:`` configured: SLOs proposed from the stack's own traffic,
so a newcomer sees goodput and burn rates rather than "No SLOs configured" (docs/up.md,
"SLOs when none are configured").

1. If the configuration has no ``slos:`` (the one ``up`` writes never has), ``up`` runs on a
   configuration of its own, ``.tailwatch/up.yaml`` (for a ``--config`` file: a copy of it),
   which both the collector and the console read.
2. Before anything starts, the store's last hour (:data:`HISTORY_SECONDS`, a previous run's
   traffic) is tried: if it gives a proposal, the SLOs are written in at once and the
   collector starts with them. Not with ``--demo``: a demo's history holds its drills.
3. Otherwise the stack calibrates on its live traffic (:class:`Calibration`, polled from
   ``up``'s loop): with ``--demo`` over the first cycle's baseline (clean traffic, before the
   first drill perturbs anything), else from the moment the stack is up. It proposes once
   every model's TTFT and ITL have enough observations, or, when the window closes, what it
   can (:func:`calibration_verdict`).
4. The proposals (``collectors.slo_proposals``, the rule of ``tailwatch slo propose``) are
   written into the configuration file (atomically: the console may read it at any moment),
   and ``up`` restarts the collector so its evaluator builds their burn-rate rules; the
   console re-reads ``slos:`` after its cache's ttl.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from collectors.config import load_yaml
from collectors.slo_proposals import ProposalReport, proposals_yaml, propose_slos
from collectors.store import Store
from slo.window import format_utc
from tailwatch.config import parse_config

Say = Callable[[str], None]
#: The window a previous run's history is read over, and the longest window ever read.
HISTORY_SECONDS = 3600.0
#: Without --demo: how long the calibration waits for every latency to have enough
#: observations before it proposes what it can.
CALIBRATION_SECONDS = 600.0
#: Seconds between two reads of the store while calibrating (demo traffic is ~2 req/s, so
#: a read every 5 s notices the 100th first token within a few seconds).
DEMO_CHECK_SECONDS = 5.0
CHECK_SECONDS = 15.0


def has_slos(config: Mapping[str, Any]) -> bool:
    """Whether a parsed ``tailwatch.yaml`` mapping configures SLOs. ``slos: []`` does: it
    says "none", on purpose; only a missing (or empty) key asks for proposals."""
    return config.get("slos") is not None


def read_mapping(path: Path) -> dict[str, Any]:
    """A ``tailwatch.yaml`` as a mapping (``up`` has already validated it)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return dict(data) if isinstance(data, Mapping) else {}


def copied_config(path: Path) -> dict[str, Any]:
    """The mapping of the user's ``path``, its ``collector.targets_file`` made absolute so
    the copy in ``.tailwatch/`` still finds the file next to the original."""
    config = read_mapping(path)
    collector = config.get("collector")
    if isinstance(collector, Mapping) and isinstance(collector.get("targets_file"), str):
        targets = Path(collector["targets_file"])
        if not targets.is_absolute():
            targets = (path.parent / targets).resolve()
        config["collector"] = {**collector, "targets_file": str(targets)}
    return config


def config_text(config: Mapping[str, Any], header: str, report: ProposalReport | None) -> str:
    """``config`` as YAML under the comment ``header``, with ``report``'s ``slos:`` section
    (its comments included) in place of any ``slos:`` it had; validated before it is
    returned (a ``collectors.config.ConfigError`` otherwise)."""
    rest = {key: value for key, value in config.items() if key != "slos"}
    text = "".join(f"# {line}\n" for line in header.splitlines())
    text += yaml.safe_dump(rest, sort_keys=False) if rest else ""
    if report is not None:
        text += proposals_yaml(report)
    parse_config(load_yaml(text, "the configuration tailwatch up writes"))
    return text


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so a reader (the
    console, on its ttl) sees the old file or the new one, never half of one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


class Verdict(enum.Enum):
    WAIT = "wait"
    PROPOSE = "propose"
    GIVE_UP = "give up"


@dataclass(frozen=True)
class CalibrationPlan:
    """The calibration window: from ``start`` (Unix seconds); by ``closes_at`` what can be
    proposed is. ``ends_at_close`` (the demo): nothing after ``closes_at`` is read, since the
    first drill perturbs the traffic then; otherwise the window keeps growing (the last
    :data:`HISTORY_SECONDS`) until some latency has enough observations."""

    start: float
    closes_at: float
    ends_at_close: bool
    check_seconds: float

    @classmethod
    def for_demo(cls, traffic_start: float, baseline_seconds: float) -> CalibrationPlan:
        return cls(traffic_start, traffic_start + baseline_seconds, True, DEMO_CHECK_SECONDS)

    @classmethod
    def for_live_traffic(cls, stack_up: float) -> CalibrationPlan:
        return cls(stack_up, stack_up + CALIBRATION_SECONDS, False, CHECK_SECONDS)

    def window(self, now: float) -> tuple[float, float]:
        """The ``[start, end]`` read at ``now``."""
        if self.ends_at_close:
            return self.start, min(now, self.closes_at)
        return max(self.start, now - HISTORY_SECONDS), now


def calibration_verdict(
    report: ProposalReport | None, now: float, plan: CalibrationPlan
) -> Verdict:
    """What to do with the window read at ``now`` (``report`` ``None``: nothing to propose
    from yet, e.g. no traffic).

    PROPOSE once something is proposed and nothing is only short of observations (every
    latency proposed, or refused for good, e.g. its p99 beyond the last bucket); after the
    window closes, as soon as anything is proposed. GIVE_UP when a demo's window closed with
    nothing proposed (later traffic has drills in it). WAIT otherwise: a live window keeps
    growing until traffic comes.
    """
    proposed = report.proposed if report is not None else ()
    is_short = report is None or any(i.is_short_of_data for i in report.indicators)
    is_closed = now >= plan.closes_at
    if proposed and (is_closed or not is_short):
        return Verdict.PROPOSE
    if is_closed and plan.ends_at_close:
        return Verdict.GIVE_UP
    return Verdict.WAIT


@dataclass(frozen=True)
class Outcome:
    """A finished calibration: ``report`` to write in (PROPOSE), or ``None`` and the
    ``reason`` nothing was proposed (GIVE_UP)."""

    report: ProposalReport | None
    reason: str = ""


class Calibration:
    """Reads the store on the plan's schedule; :meth:`poll` returns the :class:`Outcome`
    once :func:`calibration_verdict` says PROPOSE or GIVE_UP, else ``None``."""

    def __init__(self, plan: CalibrationPlan, db_url: str) -> None:
        self.plan, self.db_url = plan, db_url
        self._next_check = plan.start + plan.check_seconds
        self._store: Any = None
        self._last: ProposalReport | None = None

    def poll(self, now: float) -> Outcome | None:
        if now < self._next_check:
            return None
        self._next_check = now + self.plan.check_seconds
        report = self._read(now)
        self._last = report or self._last
        verdict = calibration_verdict(report, now, self.plan)
        if verdict is Verdict.PROPOSE:
            return Outcome(report)
        if verdict is Verdict.GIVE_UP:
            return Outcome(None, _reasons(self._last))
        return None

    def _read(self, now: float) -> ProposalReport | None:
        start, end = self.plan.window(now)
        try:
            if self._store is None:
                self._store = Store(self.db_url, migrate=False)
            return propose_slos(self._store, start, end)
        except Exception:  # NOTE: nothing to propose from yet (a ProposalError), or a busy
            return None  # store: either way the next check tries again

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def history_report(db_url: str, now: float) -> ProposalReport | None:
    """Proposals from the store's last hour, when a previous run left enough traffic there
    to propose anything; ``None`` otherwise (a new store, no schema yet, too little)."""
    try:
        store = Store(db_url, migrate=False)
    except Exception:  # NOTE: no store yet: the collector creates it
        return None
    try:
        report = propose_slos(store, now - HISTORY_SECONDS, now)
    except Exception:  # NOTE: a ProposalError (nothing stored) or an unreadable window
        return None
    finally:
        store.close()
    return report if report.proposed else None


def _iso(seconds: float) -> str:
    """A time to type back into ``--from``/``--to``: ISO 8601 in UTC, to the second."""
    return datetime.fromtimestamp(round(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def proposed_line(report: ProposalReport, what: str, config: Path) -> str:
    """The one line ``up`` prints: which SLOs, from what window, where, and that they are
    proposals to review."""
    names = ", ".join(i.summary() for i in report.proposed)
    return (
        f"SLOs proposed from {what} ({format_utc(report.start)} to {format_utc(report.end)}): "
        f"{names}; written to {config}. They are proposals to review: `tailwatch slo propose "
        f"--from {_iso(report.start)} --to {_iso(report.end)}` prints them for your tailwatch.yaml"
    )


def _reasons(report: ProposalReport | None) -> str:
    if report is None:
        return "no TTFT or ITL observations in the window"
    return "; ".join(f"{i.name}: {i.reason}" for i in report.indicators)


def wait_line(plan: CalibrationPlan) -> str:
    """The line ``up`` prints when it starts calibrating."""
    if plan.ends_at_close:
        seconds = plan.closes_at - plan.start
        return (
            "no SLOs configured: proposing TTFT and ITL SLOs from the demo's traffic before "
            f"its first drill, which waits for them (at most {seconds:.0f} s)"
        )
    return (
        "no SLOs configured: proposing TTFT and ITL SLOs once the store holds enough "
        f"observations (checked every {plan.check_seconds:.0f} s)"
    )


class OwnSLOs:
    """The configuration ``up`` runs on when none has ``slos:`` (``path``: ``mapping``
    under the comment ``header``), and the proposals it writes into it: from the store's
    history at once (:meth:`adopt_history`), else from a calibration on live traffic
    (:meth:`start`, then :meth:`poll` from ``up``'s loop)."""

    def __init__(self, path: Path, mapping: Mapping[str, Any], header: str) -> None:
        self.path, self.mapping, self.header = path, dict(mapping), header
        self._calibration: Calibration | None = None
        self._what = ""
        write_atomically(path, config_text(self.mapping, header, None))

    def adopt_history(self, db_url: str, now: float, say: Say) -> bool:
        """Write in the proposals from the store's last hour, if any; whether it did."""
        report = history_report(db_url, now)
        if report is None:
            return False
        self._adopt(report, "the store's last hour", say)
        return True

    def start(self, now: float, demo_baseline_seconds: float | None, db_url: str, say: Say) -> None:
        """Calibrate from ``now``: over the demo's first baseline, or on live traffic."""
        if demo_baseline_seconds is not None:
            plan = CalibrationPlan.for_demo(now, demo_baseline_seconds)
            self._what = "the demo's traffic before its first drill"
        else:
            plan = CalibrationPlan.for_live_traffic(now)
            self._what = "the traffic since the stack came up"
        self._calibration = Calibration(plan, db_url)
        say(wait_line(plan))

    @property
    def calibrating(self) -> bool:
        """Whether a calibration started and has not ended (proposed or given up)."""
        return self._calibration is not None

    def poll(self, now: float, say: Say) -> bool:
        """Whether proposals were just written in (the collector must restart to read them)."""
        if self._calibration is None:
            return False
        outcome = self._calibration.poll(now)
        if outcome is None:
            return False
        self.close()
        if outcome.report is None:
            say(
                f"no SLOs proposed from {self._what}: {outcome.reason}. Add slos: to a "
                "tailwatch.yaml (`tailwatch slo propose` proposes them from a window you pick)"
            )
            return False
        self._adopt(outcome.report, self._what, say)
        return True

    def close(self) -> None:
        if self._calibration is not None:
            self._calibration.close()
            self._calibration = None

    def _adopt(self, report: ProposalReport, what: str, say: Say) -> None:
        write_atomically(self.path, config_text(self.mapping, self.header, report))
        say(proposed_line(report, what, self.path))
