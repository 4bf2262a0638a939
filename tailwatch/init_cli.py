"""``tailwatch init``: write a commented ``tailwatch.yaml`` to start from (the template is
``tailwatch/init_template.yaml``, which the tests load with ``load_config``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

from tailwatch.cli_options import cli_error


def template_text() -> str:
    return (resources.files("tailwatch") / "init_template.yaml").read_text(encoding="utf-8")


def init(
    path: Annotated[Path, typer.Argument(help="Where to write it.")] = Path("tailwatch.yaml"),
    force: Annotated[bool, typer.Option(help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented tailwatch.yaml: targets (the bundled engine, a vLLM fleet, a
    Prometheus source), SLOs, alert rules and receivers, retention."""
    if path.is_dir():
        raise cli_error(f"{path} is a folder; give a file path such as {path / 'tailwatch.yaml'}")
    if path.exists() and not force:
        raise cli_error(f"{path} exists; pass --force to overwrite it")
    try:
        path.write_text(template_text(), encoding="utf-8")
    except OSError as error:
        raise cli_error(f"cannot write {path}: {error.strerror or error}") from None
    typer.echo(
        f"Wrote {path}. Edit its targets, then: tailwatch up --config {path} "
        f"(or tailwatch collect --config {path})"
    )
