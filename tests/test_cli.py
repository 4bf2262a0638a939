"""The tailwatch CLI: offline generation prints tokens and timings; mistakes are one line."""

from __future__ import annotations

from typer.testing import CliRunner

from tailwatch.cli import app

runner = CliRunner()


def test_engine_generate_prints_tokens_and_timings():
    result = runner.invoke(
        app,
        ["engine", "generate", "-p", "Hello", "-p", "Hi there", "--max-tokens", "4"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("tokens: [") == 2
    assert "TTFT" in result.output and "per-request timings" in result.output
    assert "8 output tokens" in result.output


def test_user_mistakes_are_one_clear_line_without_traceback():
    cases = [
        (["--model", "nope"], "neither a model preset"),
        (["--max-tokens", "0"], "max_tokens=0"),
        (["--max-model-len", "100000"], "max_model_len=100000"),
        (["--scheduling-policy", "lifo"], "scheduling_policy='lifo'"),
        (["--dtype", "int4"], "unknown dtype"),
    ]
    for extra, message in cases:
        result = runner.invoke(app, ["engine", "generate", "-p", "x", *extra])
        assert result.exit_code == 2, (extra, result.output)
        assert message in result.output, (extra, result.output)
        assert "Traceback" not in result.output


def test_empty_prompt_is_refused():
    result = runner.invoke(app, ["engine", "generate", "-p", ""])
    assert result.exit_code == 2 and "prompt is empty" in result.output
