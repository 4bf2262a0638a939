"""``tailwatch scenario generate``: concrete incident and benign scenarios drawn for a seed
(``loadgen.generate``), written as YAML files that ``tailwatch scenario drill`` runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadgen.errors import WorkloadError
from tailwatch.cli_options import cli_error

#: ``loadgen.generate``'s argument names as this command's options (its errors name them).
_FLAGS = {
    "seed": "--seed",
    "count": "--count",
    "kinds": "--kinds",
    "benign_share": "--benign-share",
}


def generate(
    seed: Annotated[int, typer.Option(help="The seed: the same seed gives the same files.")],
    count: Annotated[int, typer.Option(help="How many scenarios to write (1-10000).")],
    kinds: Annotated[
        str,
        typer.Option(help="Comma-separated kinds to draw from (docs/loadgen.md); default: all."),
    ] = "",
    benign_share: Annotated[
        float,
        typer.Option(
            help="The share of benign runs (no alert expected) where the kinds hold both "
            "classes; 0: incidents only, 1: benign only."
        ),
    ] = 0.5,
    output_dir: Annotated[
        Path, typer.Option(help="Where the files go (created if missing).")
    ] = Path("generated"),
) -> None:
    """Write COUNT scenarios gen-SEED-NN-KIND.yaml, each a kind drawn with its magnitude,
    share, fleet, GPU, load, onset and durations (recorded under generated:), and print one
    line per file."""
    # NOTE: lazy: it brings torch (capacity model), which the rest of the scenario group never uses
    from loadgen.generate import generate as draw
    from loadgen.generate import write_scenarios

    names = kinds.split(",") if kinds.strip() else None
    try:
        mappings = draw(seed, count, names, benign_share=benign_share)
    except WorkloadError as error:
        message = str(error).removeprefix(f"{error.field}: ")
        raise cli_error(f"{_FLAGS.get(error.field, error.field)}: {message}") from None
    try:
        paths = write_scenarios(mappings, output_dir)
    except WorkloadError as error:
        raise cli_error(f"--output-dir {error}") from None
    width = max(len(str(path)) for path in paths)
    for path, mapping in zip(paths, mappings, strict=True):
        g = mapping["generated"]
        typer.echo(
            f"{path!s:{width}s}  {g['kind']:20s} magnitude {g['magnitude']:.2f}  "
            f"share {g['share']:.2f}  replicas {g['replicas']}  "
            f"{g['model']} (tp {g['tensor_parallel_size']})"
        )
