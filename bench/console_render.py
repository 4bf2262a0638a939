"""Console render benchmark (issue 13): the server-side render time of the Overview and SLOs
pages, through Streamlit's AppTest from the entrypoint (``switch_page``, as
``tests/console/test_pages.py`` runs them), over the last 1 h and 24 h of a store holding 24 h of
16 replicas, cache cold and warm, side by side in one run.

The store is ``bench/alerts_eval.py``'s (24 h of 16 replicas scraped every 15 s: TTFT, queue,
ITL and e2e histograms, requests by reason, preemptions, prefix-cache counters, waiting,
running and KV gauges; rolled up and settled as the collector's maintenance leaves it), with a
``tailwatch.yaml`` of the same two SLOs (TTFT ≤ 0.5 s at 99 %, availability 99.9 %). It is
seeded once into ``.tailwatch/bench/`` and reused by later runs (seeding is not timed).

- **cold**: ``st.cache_data`` and ``st.cache_resource`` cleared, a fresh AppTest: the first
  viewer of a freshly started console (the Store opened again, every read a miss).
- **warm**: a fresh AppTest with the caches kept: a second viewer within the ttl.
- **AppTest fixed**: the same measure of a page that only writes a title
  (``AppTest.from_string``): AppTest's own cost, which a page's figure includes. The
  installed components are discovered once per process, as a served console does at start
  (``_components``), not in every fresh AppTest.
- **reads**: the wall time inside ``console/data.py``'s cached reads during that run (each
  top-level call timed; a hit costs the cache lookup and the copy of the value).

Wall (``time.perf_counter``) and CPU (``time.process_time``: the script thread, SQLite
in-process) of ``AppTest.run()``, median of ``REPEATS``. ``TAILWATCH_BENCH_HOURS`` shortens
the seeded day (a quick check; the 24 h range then shows what there is).
"""

from __future__ import annotations

import logging
import math
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import alerts_eval
from bench._report import print_table
from collectors.store import Store, sqlite_url

REPLICAS = 16
REPEATS = 3
TOP_READS = 5
PAGES = {"Overview": "app_pages/overview.py", "SLOs": "app_pages/slos.py"}
#: range → cold wall-clock target in seconds (issue 13).
TARGETS = {"1h": 1.0, "24h": 2.0}
ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "console" / "streamlit_app.py")
CACHE = ROOT / ".tailwatch" / "bench"
SLO_YAML = """\
slos:
  - name: chat-ttft
    description: first token within half a second
    indicator: {latency: {metric: ttft, threshold_seconds: 0.5}}
    target: 0.99
    period_days: 30
  - name: availability
    indicator: {errors: {source: requests}}
    target: 0.999
    period_days: 30
"""


def seeded_store(folder: Path, hours: float, replicas: int = REPLICAS) -> tuple[str, Path, float]:
    """``(url, config, last scrape time)`` of a store of ``hours`` of ``replicas``, seeded
    into ``folder`` unless a finished one is already there (the ``.done`` file, written last,
    holds its last scrape time)."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"console-render-{hours:g}h-{replicas}"
    path, done = folder / f"{stem}.db", folder / f"{stem}.done"
    config = folder / f"{stem}.yaml"
    config.write_text(SLO_YAML, encoding="utf-8")
    if done.exists() and path.exists():
        return sqlite_url(path), config, float(done.read_text(encoding="utf-8"))
    path.unlink(missing_ok=True)
    started = time.perf_counter()
    previous, alerts_eval.HOURS = alerts_eval.HOURS, hours
    store = Store(sqlite_url(path))
    try:
        rows, last = alerts_eval._seed(store, replicas)
        while store.maintain(last - 120.0).more_to_do:
            pass
        # NOTE: as in alerts_eval: later cycles settle the backlog's ids (then roll-ups read).
        store.maintain(last + 90.0)
        store.maintain(last + 150.0)
        covered = store.rollup_coverage() == math.inf
    finally:
        store.close()
        alerts_eval.HOURS = previous
    print(
        f"seeded {hours:g} h x {replicas} replicas at {alerts_eval.INTERVAL:g} s: {rows} rows "
        f"in {time.perf_counter() - started:.0f} s; SQLite {path.stat().st_size / 2**20:.0f} MiB; "
        f"roll-ups read {'for every stored minute' if covered else 'NOT FOR ALL MINUTES'}",
        flush=True,
    )
    done.write_text(repr(last), encoding="utf-8")
    return sqlite_url(path), config, last


class ReadTimer:
    """Wall seconds inside ``console.data``'s cached reads while installed (top-level calls
    only: a cached read that calls another is counted once)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.by_name: dict[str, float] = {}
        self._depth = threading.local()

    def _wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            depth = getattr(self._depth, "n", 0)
            self._depth.n = depth + 1
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._depth.n = depth
                if depth == 0:
                    spent = time.perf_counter() - started
                    self.seconds += spent
                    self.by_name[name] = self.by_name.get(name, 0.0) + spent

        return timed

    @contextmanager
    def installed(self) -> Iterator[ReadTimer]:
        from console import data

        # NOTE: the cached functions are the ones with .clear(); data.py looks them up as
        # module globals at call time, so wrapping the attribute times the pages' calls too.
        cached = {
            k: v
            for k, v in vars(data).items()
            if callable(v) and callable(getattr(v, "clear", None))  # not __builtins__ (a dict)
        }
        for name, fn in cached.items():
            setattr(data, name, self._wrap(name, fn))
        try:
            yield self
        finally:
            for name, fn in cached.items():
                setattr(data, name, fn)


_COMPONENTS: list = []


def _components():  # type: ignore[no-untyped-def]
    """Streamlit's registry of installed custom components, discovered once per process.

    NOTE: a served console discovers them once, when its runtime starts
    (``streamlit.runtime.Runtime.__init__``); AppTest does it again for every fresh AppTest,
    scanning every installed distribution's metadata (0.4-0.7 s here, ~440 distributions):
    a cost no viewer of a running console pays, which the cold figures counted until this
    shared registry (AppTest's private ``_bidi_component_manager``, set before its run)."""
    if not _COMPONENTS:
        from streamlit.components.v2.component_manager import BidiComponentManager

        manager = BidiComponentManager()
        manager.discover_and_register_components(start_file_watching=False)
        _COMPONENTS.append(manager)
    return _COMPONENTS[0]


def _apptest(page: str | None, range_key: str, until: float):
    from streamlit.testing.v1 import AppTest

    if page is None:
        at = AppTest.from_string("import streamlit as st\nst.title('trivial')", default_timeout=300)
        at._bidi_component_manager = _components()
        return at
    at = AppTest.from_file(APP, default_timeout=300)
    at._bidi_component_manager = _components()
    at.query_params["range"] = range_key
    at.query_params["until"] = f"{until:.0f}"
    return at.switch_page(page)


def render(page: str | None, range_key: str, until: float, *, cold: bool) -> dict:
    """One AppTest run of ``page`` (``None``: the trivial page): wall, CPU, read seconds."""
    import streamlit as st

    if cold:
        st.cache_data.clear()
        st.cache_resource.clear()
    at = _apptest(page, range_key, until)
    timer = ReadTimer()
    with timer.installed():
        wall, cpu = time.perf_counter(), time.process_time()
        at.run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    errors = [e.value for e in at.exception]
    if errors:
        raise RuntimeError(f"{page} ({range_key}) raised: {errors}")
    return {
        "wall": wall,
        "cpu": cpu,
        "reads": timer.seconds,
        "by_read": timer.by_name,
        "charts": len(at.get("vega_lite_chart")),
    }


def measure(
    url: str,
    config: Path,
    until: float,
    repeats: int = REPEATS,
    extra_env: dict[str, str] | None = None,
) -> tuple[list[tuple], list[tuple]]:
    """The table's rows (per page and range, cold and warm, median of ``repeats``), and the
    cold runs' costliest reads (``console.data`` function, median wall ms). ``extra_env``:
    more of the console's environment (``TAILWATCH_METRICS_URL``), restored afterwards."""
    env = {"TAILWATCH_DB_URL": url, "TAILWATCH_CONFIG": str(config), "TAILWATCH_LIVE": "0"}
    env.update(extra_env or {})
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return _measure(until, repeats)
    finally:  # NOTE: the smoke test runs in pytest's process: leave its environment as found
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _measure(until: float, repeats: int) -> tuple[list[tuple], list[tuple]]:
    runs = {("trivial", "-"): [render(None, "1h", until, cold=True) for _ in range(repeats)]}
    for name, page in PAGES.items():
        for range_key in TARGETS:
            cold, warm = [], []
            for _ in range(repeats):  # NOTE: interleaved, so machine noise hits both alike
                cold.append(render(page, range_key, until, cold=True))
                warm.append(render(page, range_key, until, cold=False))
            runs[name, range_key] = cold
            runs[name, range_key, "warm"] = warm
    fixed = statistics.median(r["wall"] for r in runs["trivial", "-"])

    def med(rs: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rs)

    rows = [("trivial page", "-", "-", f"{fixed * 1000:.0f}", f"{med(runs['trivial', '-'], 'cpu') * 1000:.0f}", "-", "-", "-", "-", "-")]  # fmt: skip
    for name in PAGES:
        for range_key, target in TARGETS.items():
            for kind, rs in (("cold", runs[name, range_key]), ("warm", runs[name, range_key, "warm"])):  # fmt: skip
                wall = med(rs, "wall")
                met = ("yes" if wall <= target else "NO") if kind == "cold" else "-"
                rows.append((
                    name, range_key, kind, f"{wall * 1000:.0f}", f"{med(rs, 'cpu') * 1000:.0f}",
                    f"{med(rs, 'reads') * 1000:.0f}", f"{(wall - fixed) * 1000:.0f}",
                    rs[0]["charts"], f"≤ {target:g} s" if kind == "cold" else "-", met,
                ))  # fmt: skip
    breakdown = []
    for name in PAGES:
        for range_key in TARGETS:
            cold = runs[name, range_key]
            names = {k for r in cold for k in r["by_read"]}
            spent = {k: statistics.median(r["by_read"].get(k, 0.0) for r in cold) for k in names}
            top = sorted(spent.items(), key=lambda kv: -kv[1])[:TOP_READS]
            shown = ", ".join(f"{k.lstrip('_')} {v * 1000:.0f}" for k, v in top)
            breakdown.append((name, range_key, shown))
    return rows, breakdown


HEADERS = (
    "page", "range", "cache", "wall ms", "CPU ms", "reads wall ms", "page work ms",
    "charts", "target (cold)", "met",
)  # fmt: skip


def main() -> None:
    # NOTE: AppTest outside a server logs "no runtime" / "missing ScriptRunContext" per read.
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    hours = alerts_eval.HOURS
    url, config, last = seeded_store(CACHE, hours)
    rows, breakdown = measure(url, config, last)
    print(
        f"\nAppTest.run() of each page from the entrypoint on {hours:g} h x {REPLICAS} replicas "
        f"({os.cpu_count()} cores); median of {REPEATS}; page work = wall - trivial page"
    )
    print_table(HEADERS, rows)
    print(f"\ncold runs: the costliest console.data reads (median wall ms of {REPEATS})")
    print_table(("page", "range", "reads"), breakdown)
