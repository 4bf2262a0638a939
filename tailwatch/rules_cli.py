"""``tailwatch rules export|check|backtest``: the alert rules as a Prometheus rule file, which
rules read series that no target has, and when the rules would have fired over a past window.
Options only; the logic is in ``alerts/``."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Annotated

import typer

from alerts import backtest as run_backtest
from alerts import (
    backtest_json,
    backtest_lines,
    evaluation_times,
    export_rules,
    promtool_test_files,
)
from alerts.export import EXPORT_DIALECTS
from alerts.rules import check_rules
from collectors.config import ConfigError
from collectors.dialect_rules import Dialect
from collectors.error_text import first_line
from collectors.prometheus import PrometheusReader, PrometheusSourceError
from collectors.readers import reader_for
from collectors.store import Store
from loadgen.replay_options import parse_time
from tailwatch.cli_options import check_writable_output, cli_error, save_output, typer_app
from tailwatch.config import load_config
from tailwatch.store_options import DbOption, JsonOption, open_store, parse_duration, print_json

rules_app = typer_app(
    name="rules",
    help="Alert rules: export them for Prometheus, check them against the store, backtest them.",
)
FORMATS = ("prometheus",)
_CONFIG_HELP = "tailwatch.yaml with slos: and alerts: (default: the built-in rules only)."


def _load(config: Path | None):  # type: ignore[no-untyped-def]
    try:
        return load_config(config)
    except ConfigError as error:
        raise cli_error(str(error)) from None


@rules_app.command()
def export(
    format: Annotated[
        str, typer.Option("--format", help="Output format: prometheus.")
    ] = "prometheus",
    engine: Annotated[
        str,
        typer.Option(help="Whose metric names to write: vllm, or tailwatch (the bundled engine)."),
    ] = "vllm",
    config: Annotated[Path | None, typer.Option(help=_CONFIG_HELP)] = None,
    output: Annotated[
        Path | None, typer.Option(help="Rule file to write (default: stdout).")
    ] = None,
    tests: Annotated[
        Path | None,
        typer.Option(help="Folder to write promtool test files into (needs --output)."),
    ] = None,
) -> None:
    """Write the alert rules as a Prometheus rule file (recording and alerting rules on the
    engine's real metric names), for a Prometheus that evaluates rules itself."""
    if format not in FORMATS:
        raise cli_error(f"--format={format!r}: must be one of {', '.join(FORMATS)}")
    engines = [d.value for d in EXPORT_DIALECTS]
    if engine not in engines:
        raise cli_error(f"--engine={engine!r}: must be one of {', '.join(engines)}")
    if tests is not None and output is None:
        raise cli_error("--tests: needs --output (the tests name the rule file)")
    if tests is not None and not tests.is_dir():
        raise cli_error(f"--tests {tests}: not a directory")
    if output is not None:
        check_writable_output([output], "--output")
    settings = _load(config)
    rule_set = settings.alerts.rules
    result = export_rules(rule_set, Dialect(engine), settings.alerts.notes)
    text = result.text()
    if output is None:
        typer.echo(text, nl=False)
    else:
        written = save_output(output, lambda path: path.write_text(text, encoding="utf-8"))
        typer.echo(
            f"wrote {len(result.records())} recording and {len(result.alerts())} alerting "
            f"rules to {written}",
            err=True,
        )
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    if tests is not None and output is not None:
        rules_path = os.path.relpath(output.resolve(), tests.resolve())
        files, notes = promtool_test_files(result, rule_set, rules_path)
        for name, body in files.items():
            (tests / name).write_text(body, encoding="utf-8")
        typer.echo(f"wrote {len(files)} promtool test files to {tests}", err=True)
        for note in notes:
            typer.echo(f"note: {note}", err=True)


@rules_app.command()
def check(
    config: Annotated[Path | None, typer.Option(help=_CONFIG_HELP)] = None,
    db_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL of the store (overrides the config).")
    ] = None,
) -> None:
    """List every rule whose series exist on no target in the store (exit 1 if any)."""
    settings = _load(config)
    try:
        store = Store(db_url or settings.database_url)
    except Exception as error:  # NOTE: any driver error is one line, never a traceback
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise cli_error(f"cannot open the store: {message}") from None
    try:
        results = check_rules(settings.alerts.rules, store)
    finally:
        store.close()
    broken = [r for r in results if r.missing_families]
    for result in results:
        state = "MISSING " + ", ".join(result.missing_families) if result.missing_families else "ok"
        typer.echo(f"{result.rule:<36} {result.alert:<24} {state}")
    typer.echo(f"{len(broken)} of {len(results)} rules read series that no target has", err=True)
    raise typer.Exit(1 if broken else 0)


@rules_app.command()
def backtest(
    start: Annotated[
        str,
        typer.Option(
            "--from",
            help="Start of the window: ISO 8601 (2026-12-06T10:00:00Z), Unix seconds, or "
            "a time before now (-24h).",
        ),
    ],
    end: Annotated[
        str, typer.Option("--to", help="End of the window (as --from; default: now).")
    ] = "now",
    step: Annotated[
        str | None,
        typer.Option(
            help="Time between evaluations (15s, 1m, or seconds); default: "
            "alerts.evaluation_interval, 15s."
        ),
    ] = None,
    prometheus: Annotated[
        str | None,
        typer.Option(
            "--prometheus",
            help="Read metrics from this Prometheus-compatible server (Prometheus, Thanos, "
            "Mimir, VictoriaMetrics) instead of the config's prometheus: section or the store.",
        ),
    ] = None,
    match: Annotated[
        str,
        typer.Option(help='With --prometheus: a selector every query carries ({job="vllm"}).'),
    ] = "",
    triage: Annotated[
        bool,
        typer.Option(
            "--triage",
            help="Also run triage when each alert fires and show the cause it names.",
        ),
    ] = False,
    config: Annotated[Path | None, typer.Option(help=_CONFIG_HELP)] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Evaluate the rules at every evaluation time of a past window, over the store or a
    Prometheus, and show per rule when it would have paged or ticketed (nothing is saved,
    nobody is notified)."""
    if match and prometheus is None:
        raise cli_error(
            "--match goes with --prometheus URL (the config's prometheus: section has its own match:)"
        )
    clock = time.time()
    try:
        times = (parse_time("--from", start, clock), parse_time("--to", end, clock))
    except ValueError as error:
        raise cli_error(first_line(error)) from None
    settings = _load(config)
    seconds = (
        settings.alerts.evaluation_interval_seconds
        if step is None
        else parse_duration("--step", step)
    )
    try:
        evaluation_times(*times, seconds)
    except ValueError as error:
        raise cli_error(first_line(error)) from None
    for note in settings.alerts.notes:
        typer.echo(f"note: {note}", err=True)
    with contextlib.ExitStack() as stack:
        source = settings.metrics
        if source is None and prometheus is None:  # NOTE: the store only when it holds them
            reader = stack.enter_context(open_store(db or settings.database_url))
        else:
            try:
                reader = (
                    PrometheusReader(prometheus, match=match)
                    if prometheus is not None
                    else reader_for(source.url, match=source.match, headers=source.headers or None)  # type: ignore[union-attr]
                )
            except (ValueError, PrometheusSourceError) as error:
                raise cli_error(
                    f"--prometheus: {first_line(error)}" if prometheus else first_line(error)
                ) from None
            stack.callback(reader.close)  # type: ignore[attr-defined]
        try:
            result = run_backtest(settings.alerts.rules, reader, *times, seconds, triage=triage)
        except Exception as error:  # NOTE: a store or server that cannot answer is one line
            raise cli_error(f"backtest failed: {first_line(error)}") from None
    if json_output:
        print_json(backtest_json(result))
        return
    for line in backtest_lines(result):
        typer.echo(line)
