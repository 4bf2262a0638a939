"""The catalog's caches: layout bounds are read once per layout, and no cache grows past its
bound (label churn cannot grow one forever)."""

from __future__ import annotations

import math

from sqlalchemy import event, select
from sqlalchemy.orm import sessionmaker

from collectors.canonical import CanonicalHistogram, Flag
from collectors.store import ScrapeRecord, Store
from collectors.store import catalog as catalog_module
from collectors.store.catalog import Catalog
from collectors.store.models import Layout


def _histogram(bounds: tuple[float, ...], target: str) -> CanonicalHistogram:
    counts = tuple(float(i + 1) for i in range(len(bounds)))
    return CanonicalHistogram(
        "ttft_seconds", (("target", target),), bounds, counts, 1.0, counts[-1]
    )


def test_layout_bounds_are_read_once_and_the_cache_stays_bounded(store: Store, monkeypatch) -> None:
    layouts = [(0.1, math.inf), (0.1, 1.0, math.inf), (0.5, 1.0, 2.0, math.inf)]
    for i, bounds in enumerate(layouts):
        assert store.write_scrape(
            ScrapeRecord(f"t{i}", 1.0, histograms=(_histogram(bounds, f"t{i}"),))
        )
    monkeypatch.setattr(catalog_module, "MAX_CACHED_IDS", 2)
    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    catalog = Catalog()
    with sessionmaker(store.engine)() as session:
        ids = dict(session.execute(select(Layout.bounds_json, Layout.id)).all())
        first_id = min(ids.values())
        statements.clear()
        bounds = catalog.bounds(session, first_id)
        assert catalog.bounds(session, first_id) == bounds  # the second read is cached
        assert len(statements) == 1
        for layout_id in sorted(ids.values()):
            catalog.bounds(session, layout_id)
        assert sorted(catalog.bounds(session, i) for i in ids.values()) == sorted(layouts)
        assert len(catalog._bounds_by_layout) <= 2  # started over instead of growing


def test_identities_cache_stays_bounded(monkeypatch) -> None:
    monkeypatch.setattr(catalog_module, "MAX_CACHED_IDS", 3)
    catalog = Catalog()
    flags = frozenset({Flag.TOKEN_WEIGHTED, Flag.RENAMED})  # one semantic flag, one not
    keys = [catalog.identity("f", (("target", str(i)),), flags) for i in range(10)]
    assert len(set(keys)) == 10 and len(catalog._identities) <= 3
    # the identity itself does not depend on the cache: same inputs, same key
    assert catalog.identity("f", (("target", "0"),), flags) == keys[0]
    assert keys[0][0] == "f" and keys[0][1] == '{"target":"0"}'
    assert keys[0][2] == "token_weighted"  # only the flag that changes the meaning
