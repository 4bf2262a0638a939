"""``reader_for``: one URL opens the store or the push-down reader, and nothing else."""

from __future__ import annotations

import pytest

from collectors.prometheus import PrometheusReader
from collectors.readers import reader_for
from collectors.store import Store, sqlite_url
from collectors.store.protocols import MetricsReader


def test_a_server_url_opens_the_push_down_reader() -> None:
    reader = reader_for("http://127.0.0.1:9090/", match='{job="vllm"}', semantics="prometheus-3")
    assert isinstance(reader, PrometheusReader) and isinstance(reader, MetricsReader)
    assert (reader.api.url, reader.match, reader.semantics.value) == (
        "http://127.0.0.1:9090",
        'job="vllm"',
        "prometheus-3",
    )
    reader.close()


def test_a_database_url_opens_the_store(tmp_path) -> None:
    store = reader_for(sqlite_url(tmp_path / "tw.db"))
    assert isinstance(store, Store)
    store.close()
    with pytest.raises(ValueError, match="for a Prometheus URL"):
        reader_for(sqlite_url(tmp_path / "tw.db"), match='{job="x"}')


@pytest.mark.parametrize("url", ["prometheus:9090", "ftp://x", ""])
def test_anything_else_is_one_clear_error(url: str) -> None:
    with pytest.raises(ValueError, match="expected a Prometheus-compatible server"):
        reader_for(url)


def test_api_responses_only_where_the_series_says_its_handler() -> None:
    """The dialect's ``match_prefix`` (only ``/v1/…`` handlers count as API responses, series
    without the label as before) reaches the server as one anchored regex matcher."""
    import re

    from collectors import canonical as c
    from collectors.prometheus.names import resolve

    (source,) = resolve(c.HTTP_RESPONSES_TOTAL, ["tailwatch:http_responses_total"])
    text = source.matchers({})
    assert 'handler=~"/v1/.*|"' in text
    pattern = re.compile(r"(?:/v1/.*|)")  # PromQL regexes are anchored at both ends
    assert pattern.fullmatch("/v1/completions") and pattern.fullmatch("")
    assert not pattern.fullmatch("/metrics") and not pattern.fullmatch("/ready")
