"""``tailwatch slo propose``: SLOs proposed from a stored window, printed as the ``slos:``
section of ``tailwatch.yaml`` (docs/slo.md, "Proposing SLOs"). Options only: the proposals
are :func:`collectors.slo_proposals.propose_slos`, the rule ``slo.propose_latency_objective``.

Every mistake (a bad time or margin, an unknown model, an empty window, a store that cannot
be read) is one ``error:`` line and exit code 2."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated

import typer

from collectors.config import ConfigError
from collectors.error_text import first_line
from collectors.slo_proposals import ProposalError, proposals_yaml, propose_slos
from loadgen.replay_options import parse_time
from tailwatch.cli_options import (
    check_writable_output,
    cli_error,
    config_path,
    save_output,
    typer_app,
)
from tailwatch.config import load_config
from tailwatch.store_options import DbOption, open_store

slo_app = typer_app(name="slo", help="SLOs: propose them from a stored window (docs/slo.md).")


@slo_app.command("propose")
def propose(
    from_: Annotated[
        str,
        typer.Option("--from", help="Window start: now, Unix seconds, ISO 8601, or -15m."),
    ] = "-1h",
    to: Annotated[str, typer.Option("--to", help="Window end (same forms).")] = "now",
    db: DbOption = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="tailwatch.yaml whose database_url to read (default: ./tailwatch.yaml "
            "when it exists); --db wins."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Propose for this model only (default: every model stored)."),
    ] = None,
    margin: Annotated[
        float,
        typer.Option(
            help="Attainment kept between the window and each target, a fraction in "
            "[0, 1) (0.005: half a percent)."
        ),
    ] = 0.005,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the YAML to this file, not stdout."),
    ] = None,
) -> None:
    """Propose a TTFT and an ITL latency SLO per model from the window's histograms: each
    threshold the bucket edge at or above the window's p99, each target the highest of
    0.9/0.95/0.99/0.995/0.999 that the attainment there (its 95% lower bound) met with the
    margin to spare. Prints them as slos: YAML, each with the attainment and observations
    it had over the window."""
    if not (math.isfinite(margin) and 0 <= margin < 1):
        raise cli_error(f"--margin {margin!r}: must be a fraction in [0, 1), e.g. 0.005")
    if model is not None and not model.strip():
        raise cli_error(f"--model {model!r}: give a model name, or leave --model out for all")
    now = time.time()
    try:
        start, end = parse_time("--from", from_, now), parse_time("--to", to, now)
    except ValueError as error:
        raise cli_error(str(error)) from None
    if not end > start:
        raise cli_error(f"--to {to!r}: must be after --from {from_!r}")
    if output is not None:
        check_writable_output([output], "--output")
    path = config_path(config)
    if path is not None:
        try:
            db = db or load_config(path).database_url
        except ConfigError as error:
            raise cli_error(str(error)) from None
    with open_store(db) as store:
        try:
            report = propose_slos(store, start, end, model=model, margin=margin)
        except ProposalError as error:
            raise cli_error(str(error)) from None
        except Exception as error:  # NOTE: a database error mid-read is one line, no trace
            raise cli_error(f"cannot read the store: {first_line(error)}") from None
    text = proposals_yaml(report)
    if output is None:
        typer.echo(text, nl=False)
        return
    written = save_output(output, lambda target: target.write_text(text, encoding="utf-8"))
    typer.echo(f"wrote {len(report.proposed)} proposed SLO(s) to {written}", err=True)
