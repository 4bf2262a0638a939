"""``tailwatch rules check``: rules whose families have series on no target."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from alerts.rules import builtin_rule_set, check_rules
from collectors import canonical as c
from tailwatch.cli import app

#: The speculation counters spec-acceptance-drop reads: the fixtures' servers do not speculate.
SPEC = (c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL, c.SPEC_DECODE_DRAFT_TOKENS_TOTAL)


class SeriesOnly:
    """A reader that has series for some families, and counts the lookups."""

    def __init__(self, families: set[str]) -> None:
        self.families = families
        self.lookups: list[str] = []

    def series(self, family: str, labels: None = None) -> list[str]:
        self.lookups.append(family)
        return [family] if family in self.families else []


def test_check_reports_the_missing_families_of_each_rule_once():
    rules, _ = builtin_rule_set()
    present = set(c.FAMILIES) - {c.PREEMPTIONS_TOTAL, c.PREFIX_CACHE_QUERIES_TOTAL}
    reader = SeriesOnly(present)
    results = {r.rule: r for r in check_rules(rules, reader)}
    assert results["kv-saturation"].missing_families == (c.PREEMPTIONS_TOTAL,)
    assert results["prefix-hit-drop"].missing_families == (c.PREFIX_CACHE_QUERIES_TOTAL,)
    assert results["queue-growth"].missing_families == ()
    assert results["target-down"].missing_families == ()
    assert results["gpu-health"].missing_families == (c.GPU_ECC_ERRORS_TOTAL, c.GPU_THROTTLE_ACTIVE)
    assert set(results["metric-absent"].missing_families) == {
        c.PREEMPTIONS_TOTAL,
        c.PREFIX_CACHE_QUERIES_TOTAL,
    }
    assert len(reader.lookups) == len(set(reader.lookups))  # each family read once


def test_cli_check_against_an_empty_store_lists_every_rule_and_exits_1(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    result = CliRunner().invoke(app, ["rules", "check", "--db-url", url])
    assert result.exit_code == 1, result.output
    assert "queue-growth" in result.output and "MISSING requests_waiting" in result.output
    assert "14 of 15 rules read series that no target has" in result.output


def test_cli_check_reports_an_unopenable_store_in_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'missing' / 'dir' / 'x.db'}"
    result = CliRunner().invoke(app, ["rules", "check", "--db-url", url])
    assert result.exit_code == 2
    assert result.output.startswith("error: cannot open the store: ")
    assert "Traceback" not in result.output


def _store_with(tmp_path, fixture: str):
    from prometheus_client.parser import text_string_to_metric_families

    from collectors import normalise
    from collectors.store import Store
    from collectors.store.records import ScrapeRecord

    text = (
        Path(__file__).parents[1] / "collectors" / "fixtures" / "conformance" / fixture
    ).read_text()
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    scrape = normalise(text_string_to_metric_families(text), "replica-a")
    store.write_scrapes([ScrapeRecord.from_normalised("replica-a", 1_800_000_000.0, scrape)])
    return store


def test_check_against_a_store_with_a_real_vllm_scrape(tmp_path):
    """vLLM 0.33's exposition has every family the engine rules read but NVML's and the
    bundled engine's structured-output finishes (truncation-rise reads those only), and the
    speculation counters (a server without speculation exports none)."""
    store = _store_with(tmp_path, "vllm-0.33.txt")
    try:
        rules, _ = builtin_rule_set()
        broken = {
            r.rule: r.missing_families for r in check_rules(rules, store) if r.missing_families
        }
    finally:
        store.close()
    assert broken == {
        "gpu-health": (c.GPU_ECC_ERRORS_TOTAL, c.GPU_THROTTLE_ACTIVE),
        "truncation-rise": (c.STRUCTURED_OUTPUT_FINISHED_TOTAL,),
        "spec-acceptance-drop": SPEC,
        "client-gap": (c.CLIENT_TTFT_SECONDS,),
    }


def test_check_against_an_old_vllm_scrape_names_what_it_lacks(tmp_path):
    """vLLM ≈0.5 (V0) had no prefix-cache counters and no queue-time histogram."""
    store = _store_with(tmp_path, "vllm-0.5-v0.txt")
    try:
        rules, _ = builtin_rule_set()
        broken = {
            r.rule: r.missing_families for r in check_rules(rules, store) if r.missing_families
        }
    finally:
        store.close()
    prefix = (c.PREFIX_CACHE_HITS_TOTAL, c.PREFIX_CACHE_QUERIES_TOTAL)
    assert broken == {
        "queue-growth": (c.QUEUE_SECONDS,),
        "prefix-hit-drop": prefix,
        "gpu-health": (c.GPU_ECC_ERRORS_TOTAL, c.GPU_THROTTLE_ACTIVE),
        "truncation-rise": (c.STRUCTURED_OUTPUT_FINISHED_TOTAL,),
        "spec-acceptance-drop": SPEC,
        "client-gap": (c.CLIENT_TTFT_SECONDS,),
        "metric-absent": (c.QUEUE_SECONDS, *prefix),
    }
