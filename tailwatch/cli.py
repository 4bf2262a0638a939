"""The ``tailwatch`` command line."""

from __future__ import annotations

import typer

from tailwatch.engine_cli import engine_app, run_demo
from tailwatch.serve_cli import serve

app = typer.Typer(
    name="tailwatch",
    help="Observability and SLO operations for LLM inference serving.",
    no_args_is_help=True,
    add_completion=False,
)
engine_app.command()(serve)
app.add_typer(engine_app, name="engine")


@app.command()
def demo() -> None:
    """What `make run` starts: today, an offline generation demo of the bundled engine."""
    run_demo()


if __name__ == "__main__":
    app()
