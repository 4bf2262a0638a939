"""What ``tailwatch replay`` shows and where it keeps it: the store it opens (a
``RequestReader`` that is also a ``LabStore``), the progress bar, and the side-by-side
table of replay against production."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from collectors.error_text import first_line
from collectors.store import Store, default_url
from collectors.store.protocols import LabStore, RequestReader
from slo.window import format_utc
from tailwatch.cli_options import cli_error

_ROWS = (
    ("TTFT", "ttft_ms"),
    ("TPOT", "tpot_ms"),
    ("ITL", "itl_ms"),
    ("e2e", "e2el_ms"),
)


@contextlib.contextmanager
def open_lab_store(db: str | None) -> Iterator[Any]:
    """The store at ``db`` (schema brought up to date: replay writes a lab run), which must
    read request records and keep lab runs; any failure to open it is one ``error:`` line."""
    if db is not None and not db.strip():
        raise cli_error(f"--db {db!r}: expected a SQLAlchemy URL, e.g. sqlite:///tailwatch.db")
    try:
        store = Store(db or default_url())
    except Exception as error:  # NOTE: any URL, driver or schema error is one line
        raise cli_error(f"--db: cannot open the store: {first_line(error)}") from None
    try:
        if not (isinstance(store, RequestReader) and isinstance(store, LabStore)):
            raise cli_error("--db: this store cannot keep lab runs (no LabStore); nothing was run")
        yield store
    finally:
        store.close()


class _Bar:
    """A rich progress bar started once the trace is known (its size and description)."""

    def __init__(self, progress: Any) -> None:
        self._progress = progress
        self._task: Any = None

    def start(self, total: int, description: str) -> None:
        typer.echo(description, err=True)
        if self._progress is not None:
            self._task = self._progress.add_task("replay", total=total)

    def update(self, done: int, total: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=done, total=total)


@contextlib.contextmanager
def progress_bar(*, show: bool) -> Iterator[_Bar]:
    if not show:
        yield _Bar(None)
        return
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
    ) as progress:
        yield _Bar(progress)


def trace_line(trace: Any) -> str:
    """One line on what is replayed, and what is not (never a silent drop)."""
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(trace.unreplayable.items()))
    line = (
        f"replaying {len(trace.requests)} of {trace.num_records} request records from "
        f"{format_utc(trace.window_start)} to {format_utc(trace.window_end)}"
    )
    if skipped:
        line += f"; not replayable: {skipped}"
    if trace.num_prefix_groups:
        line += (
            f"; {trace.num_prefix_groups} shared-prefix groups "
            f"({trace.num_unseeded_groups} with no earlier request of theirs to seed the cache)"
        )
    return line


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _delta(pair: dict[str, Any], scale: float = 1.0, unit: str = "") -> str:
    if pair["difference"] is None:
        return "-"
    text = f"{pair['difference'] * scale:+.1f}{unit}"
    if pair["ratio"] is not None:
        text += f" ({(pair['ratio'] - 1) * 100:+.0f}%)"
    return text


def report_table(report: Any) -> None:
    """Replay against production, figure by figure, then the run's id."""
    fleet = report.fleet
    on = ""
    if fleet is not None:
        on = f", {fleet.num_replicas} replica{'s' * (fleet.num_replicas != 1)}, {fleet.route}"
    table = Table(title=f"replay (lab run {report.run_id}, {report.status}{on})")
    for column in ("figure", "production", "replay", "replay − production"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for label, key in _ROWS:
        for q in ("p50", "p95", "p99"):
            pair = report.difference[f"{key}.{q}"]
            table.add_row(
                f"{label} {q} ms", _ms(pair["production"]), _ms(pair["replay"]), _delta(pair)
            )
    for label, key, fmt in (
        ("attainment", "slo_attainment", "{:.3f}"),
        ("goodput req/s", "request_goodput", "{:.2f}"),
        ("throughput req/s", "request_throughput", "{:.2f}"),
        ("prefix-cache hit tokens", "total_cached_tokens", "{:d}"),
    ):
        pair = report.difference[key]
        shown = [
            ("-" if v is None else fmt.format(v)) for v in (pair["production"], pair["replay"])
        ]
        delta = "-" if pair["difference"] is None else fmt.format(pair["difference"])
        table.add_row(label, *shown, delta)
    table.add_row(
        "requests ok / replayed",
        f"{report.production['num_succeeded']}/{len(report.trace.requests)}",
        f"{report.replay['num_succeeded']}/{report.replay['num_scheduled']}",
        "",
    )
    if fleet is not None and fleet.num_replicas > 1:
        _replica_rows(table, report.per_replica)
    Console().print(table)
    typer.echo("production has no per-token times: compare TPOT (ITL is the replay's only)")


#: Replicas shown one by one in the table's per-replica rows (the rest as ``…``; --json
#: has them all).
_REPLICAS_SHOWN = 8


def _replica_rows(table: Any, per_replica: list[dict[str, Any]]) -> None:
    """Requests and prefix-cache hit tokens per replica, ``a/b/…`` in replica order
    (production's: as-recorded only, the same requests on the replica they went to)."""

    def split(key: str, side: str | None) -> str:
        entries = [e[side] if side else e for e in per_replica]
        if any(e is None for e in entries):
            return "-"
        shown = ["-" if e[key] is None else str(e[key]) for e in entries[:_REPLICAS_SHOWN]]
        return "/".join(shown) + ("/…" if len(entries) > _REPLICAS_SHOWN else "")

    for label, key in (
        ("requests per replica", "num_requests"),
        ("prefix hits per replica", "cached_tokens"),
    ):
        table.add_row(label, split(key, "production"), split(key, None), "")


def report_json(report: Any) -> dict[str, Any]:
    return {
        "run_id": report.run_id,
        "status": str(report.status),
        "trace": report.trace.describe(),
        "knobs_in_force": dict(report.knobs) if report.knobs is not None else None,
        "production": report.production,
        "replay": report.replay,
        "difference": report.difference,
        "fleet": None
        if report.fleet is None
        else {**report.fleet.describe(), "per_replica": report.per_replica},
    }
