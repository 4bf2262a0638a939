"""The command table (``tailwatch.cli.COMMANDS``): ``tailwatch --help`` lists every command
without importing one, each row's help is its command's, and a command's module is imported
only when the command is called."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer.main
from typer.core import TyperGroup
from typer.testing import CliRunner

from tailwatch.cli import COMMANDS, app, load_command

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()

#: What a command may import and ``tailwatch --help`` must not.
HEAVY = ("torch", "sqlalchemy", "numpy", "pandas", "streamlit", "httpx", "fastapi", "uvicorn")
PROJECT = ("alerts", "collectors", "console", "engine", "loadgen", "slo")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("name", COMMANDS)
def test_each_rows_help_is_its_commands_first_sentence(name):
    command = load_command(name)
    assert COMMANDS[name].help == command.get_short_help_str(limit=10**6)


@pytest.mark.parametrize("width", [50, 80, 200])
def test_the_listing_is_the_one_typer_prints_from_the_commands_themselves(width):
    group = typer.main.get_command(app)
    ctx = click.Context(group, info_name="tailwatch")

    def listing(format_commands) -> str:
        formatter = click.HelpFormatter(width=width)
        format_commands(ctx, formatter)
        return formatter.getvalue()

    from_table = listing(group.format_commands)
    assert from_table == listing(lambda c, f: TyperGroup.format_commands(group, c, f))


def test_help_lists_every_command_and_imports_none():
    code = (
        "import json, sys\n"
        "from tailwatch.cli import app\n"
        "try:\n"
        "    app(['--help'], prog_name='tailwatch')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    listed = result.stdout.split("Commands:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in listed if line.startswith("  ")] == list(COMMANDS)
    imported = set(json.loads(result.stderr.splitlines()[-1]))
    assert imported & {row.module for row in COMMANDS.values()} == set()
    assert {m.split(".")[0] for m in imported} & {*HEAVY, *PROJECT} == set()


def test_calling_a_command_imports_its_module_alone():
    code = (
        "import json, sys\n"
        "from tailwatch.cli import app\n"
        "try:\n"
        "    app(['init', '--help'], prog_name='tailwatch')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    imported = set(json.loads(result.stderr.splitlines()[-1]))
    modules = {row.module for row in COMMANDS.values()}
    assert imported & modules == {"tailwatch.init_cli"}


def test_a_mistyped_command_is_still_offered_the_right_one():
    result = runner.invoke(app, ["engin"])
    assert result.exit_code == 2
    assert "No such command 'engin'. Did you mean 'engine'?" in result.output
