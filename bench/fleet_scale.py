"""Fleet scale (issue 24, item 3): Tailwatch on the Prometheus and the VictoriaMetrics that
hold a fleet's last day, at 16, 100 and 500 vLLM replicas, beside the embedded SQLite store
where it can hold the same day.

**The history** (``bench/_fleet_history.py``): 24 h of 108 series a replica (TTFT, ITL,
e2e and queue histograms in vLLM's layouts, requests by finished_reason, preemptions,
prefix-cache and token counters, running, waiting and KV usage), scraped every 60 s, ending at
the minute the benchmark starts, with three incidents planted (an overload, slow replicas, KV
exhaustion). 60 s rather than 15 s so that 500 replicas (53,500 series, 77 M samples) load in
minutes here; every built-in rule's window (5 m) still holds five samples. Prometheus 2.42 is
loaded with ``promtool tsdb create-blocks-from openmetrics`` (one file per 2 h block), and
VictoriaMetrics with its ``/api/v1/import``; SQLite (16 replicas) through the store's API.

**Measured, per store and fleet, in one run:**

- one evaluation cycle of the built-in rules plus the page and ticket burn-rate rules of two
  SLOs (TTFT ≤ 0.5 s at 99 %, availability 99.9 %): wall, Tailwatch's own CPU
  (``time.process_time``: the reader, the evaluator and, for SQLite, the database), the
  server's CPU (``/proc/<pid>/stat``), and the queries sent; the first (cold) cycle and the
  median of ``REPEATS`` more at successive 15 s ticks;
- the Overview and SLOs pages over 1 h and 24 h, cache cold and warm (``bench/console_render``'s
  AppTest measure, with ``TAILWATCH_METRICS_URL`` set to the server);
- the planted incidents: at 16 replicas on Prometheus, ``tailwatch rules backtest --triage``
  of the built-in rules over the whole day every 5 minutes; elsewhere (a cycle over 500
  replicas takes too long here for a day of them) the evaluator with triage at two
  evaluations ``for:`` apart in the middle of each incident and at two quiet times between
  them. Each incident must page its rule with its cause ranked first, and nothing else may
  page;
- the cycle and the pages again once each server holds what ``tailwatch rules export``
  records (the rules' windows over the last 10 minutes and the console's fleet records over
  the day): Prometheus from blocks of ``promtool tsdb create-blocks-from rules``,
  VictoriaMetrics from ``vmalert -replay`` (Debian's vmalert, at 60 s steps);
- ``tailwatch up --prometheus URL`` from the command to an Overview drawn in headless Chromium
  (its first chart on screen): discovery, the SLO proposal, the first evaluation and the
  console's start included.

``python -m bench fleet_scale --replicas 16`` measures one fleet (a quick check);
``--skip-up`` leaves out the browser measure.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import yaml

from alerts import AlertState, Evaluator, MemoryAlertState, rule_of
from alerts import backtest as run_backtest
from alerts.export.console_records import GROUP as CONSOLE_GROUP
from alerts.rules import builtin_rule_set
from alerts.triage import triage_explainer
from alerts.views import iso
from bench import console_render
from bench._cycles import REPEATS, TICK
from bench._cycles import measure as evaluation_cycles
from bench._fleet_history import MODEL, SERIES_PER_REPLICA, FleetHistory
from bench._report import print_table
from bench._slos import SLOS
from collectors.canonical import CanonicalHistogram, CanonicalSample, Kind
from collectors.prometheus import PrometheusReader
from collectors.store import ScrapeRecord, Store, sqlite_url
from tests.collectors.metrics_servers import backfill, prometheus_over, victoriametrics_over
from tests.services import free_port, promtool_binary, stop_process

REPLICA_COUNTS = (16, 100, 500)
#: Fleets small enough to load into SQLite beside the servers (16 × a day at 60 s: 2.5 M values).
SQLITE_REPLICAS = (16,)
HOURS = float(os.environ.get("TAILWATCH_BENCH_HOURS", "24"))
#: The fleets whose whole day is backtested (on Prometheus), and the backtest's step: a
#: cycle over a larger fleet takes too long here for a day of them.
BACKTEST_REPLICAS = (16,)
BACKTEST_STEP = 300.0
#: The live evaluations each incident is checked with where the day is not backtested.
CHECK_STEP = 120.0
CHECK_SECONDS = 720.0
#: How much of the history's end the exported recording rules are backfilled over.
RECORDS_SECONDS = 600.0
#: Issue 24's targets at 500 replicas.
CYCLE_WALL_TARGET = 1.0
CYCLE_CPU_SHARE_TARGET = 0.02
OVERVIEW_24H_COLD_TARGET = 2.0
UP_TARGET = 60.0
ROOT = Path(__file__).resolve().parent.parent


# --- loading ---------------------------------------------------------------------------------


def load_prometheus(history: FleetHistory, folder: Path) -> tuple[Path, float]:
    """Blocks of ``history`` in ``folder/tsdb``, two promtool processes at once; the seconds
    the load took (text and blocks)."""
    started = time.perf_counter()
    files = history.write_openmetrics(folder / "openmetrics")
    tsdb = folder / "tsdb"
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda f: backfill(f, tsdb), files))
    for f in files:
        f.unlink()
    return tsdb, time.perf_counter() - started


def exported_rules(folder: Path) -> tuple[Path, Path]:
    """``tailwatch rules export`` of the built-in rules and the two SLOs into ``folder``: the
    whole file, and one of the console's fleet records (``tailwatch-console-fleet``) alone."""
    folder.mkdir(parents=True, exist_ok=True)
    config, rules = folder / "tailwatch.yaml", folder / "tailwatch.rules.yml"
    config.write_text(console_render.SLO_YAML, encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "tailwatch", "rules", "export", "--config", str(config),
         "--output", str(rules)],
        check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    exported = yaml.safe_load(rules.read_text(encoding="utf-8"))
    console = folder / "console.rules.yml"
    groups = [g for g in exported["groups"] if g["name"] == CONSOLE_GROUP]
    console.write_text(yaml.safe_dump({"groups": groups}), encoding="utf-8")
    return rules, console


def _recorded_spans(history: FleetHistory, folder: Path) -> list[tuple[float, float, Path]]:
    """The exported recording rules over the history's last 10 minutes, and the console's
    fleet records over the rest of the day: what a server evaluating them would hold by then
    (the console's charts read a day of their records; the evaluator reads the last samples of
    its own)."""
    rules, console = exported_rules(folder)
    split = history.end - RECORDS_SECONDS
    return [(split, history.end, rules), (history.start, split, console)]


def backfill_records(history: FleetHistory, url: str, folder: Path) -> Path:
    """``promtool tsdb create-blocks-from rules`` of :func:`_recorded_spans` from the
    Prometheus at ``url``; the blocks' folder."""
    blocks = folder / "blocks"
    for start, end, file in _recorded_spans(history, folder):
        subprocess.run(
            [promtool_binary(), "tsdb", "create-blocks-from", "rules", f"--url={url}",
             f"--start={start:.0f}", f"--end={end:.0f}", "--eval-interval=60s",
             f"--output-dir={blocks}", "--quiet", str(file)],
            check=True, capture_output=True, timeout=3600,
        )  # fmt: skip
    return blocks


def replay_records(history: FleetHistory, url: str, folder: Path) -> float:
    """``vmalert -replay`` of :func:`_recorded_spans` (their recording rules: as promtool,
    the alerting rules are left out) into the VictoriaMetrics at ``url``, evaluated every
    60 s (``-datasource.queryStep``: vmalert's replay otherwise steps by 5 minutes), and
    flushed; the seconds it took."""
    vmalert = shutil.which("vmalert") or "/usr/bin/vmalert"
    started = time.perf_counter()
    for start, end, file in _recorded_spans(history, folder):
        groups = yaml.safe_load(file.read_text(encoding="utf-8"))["groups"]
        for group in groups:
            group["rules"] = [r for r in group["rules"] if "record" in r]
        records = file.with_suffix(".records.yml")
        records.write_text(yaml.safe_dump({"groups": groups}), encoding="utf-8")
        done = subprocess.run(
            [vmalert, f"-rule={records}", f"-datasource.url={url}", f"-remoteWrite.url={url}",
             f"-replay.timeFrom={iso(start)}", f"-replay.timeTo={iso(end)}",
             "-replay.disableProgressBar", "-replay.rulesDelay=0s", "-datasource.queryStep=60s",
             "-evaluationInterval=60s"],
            capture_output=True, text=True, timeout=3600,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"vmalert -replay failed: {done.stderr[-2000:]}")
    httpx.get(f"{url}/internal/force_flush", timeout=60)
    return time.perf_counter() - started


def load_victoriametrics(history: FleetHistory, url: str) -> float:
    """``history`` imported into the VictoriaMetrics at ``url`` and flushed; the seconds."""
    started = time.perf_counter()
    with httpx.Client(timeout=600) as client:
        for chunk in history.victoriametrics_lines():
            answer = client.post(f"{url}/api/v1/import", content=chunk)
            if answer.status_code != 204:
                raise RuntimeError(f"VictoriaMetrics import: {answer.status_code} {answer.text}")
        client.get(f"{url}/internal/force_flush")
    return time.perf_counter() - started


def load_sqlite(history: FleetHistory, path: Path) -> float:
    """``history`` written into a SQLite store through its API and rolled up; the seconds."""
    started = time.perf_counter()
    store = Store(sqlite_url(path))
    try:
        for k in range(history.steps):
            store.write_scrapes([_record(history, r, k) for r in range(history.replicas)])
        while store.maintain(history.end - 120.0).more_to_do:
            pass
        store.maintain(history.end + 90.0)  # NOTE: as bench/alerts_eval: settle the backlog
        store.maintain(history.end + 150.0)
    finally:
        store.close()
    return time.perf_counter() - started


def _record(history: FleetHistory, r: int, k: int) -> ScrapeRecord:
    target = history.instance(r)
    labels = (("model", MODEL), ("target", target))
    histograms = tuple(
        CanonicalHistogram(
            family, labels, (*bounds, float("inf")), tuple(counts[r, k].tolist()),
            float(sums[r, k]), float(counts[r, k, -1]),
        )
        for family, (bounds, counts, sums) in history.histograms.items()
    )  # fmt: skip
    samples = [
        CanonicalSample(
            family,
            tuple(sorted({**dict(labels), **({"finished_reason": reason} if reason else {})}.items())),
            float(values[r, k]),
            Kind.COUNTER,
        )
        for (family, reason), values in history.counters.items()
    ]  # fmt: skip
    samples += [
        CanonicalSample(family, labels, float(values[r, k]), Kind.GAUGE)
        for family, values in history.gauges.items()
    ]
    return ScrapeRecord(target, float(history.times[k]), tuple(samples), histograms)


# --- measures --------------------------------------------------------------------------------


def backtest_day(reader, history: FleetHistory, step: float = BACKTEST_STEP) -> dict[str, object]:
    """``rules backtest --triage`` of the built-in rules over the whole history (from an hour
    in, so the baselines have history): per planted incident whether its rule paged while it
    held with its cause first, and every page outside the incidents."""
    rules, _ = builtin_rule_set(SLOS)
    started = time.perf_counter()
    result = run_backtest(rules, reader, history.start + 3600.0, history.end, step, triage=True)
    pages = [(r.rule, f.start, f.cause) for r in result.rules if r.severity == "page" for f in r.firings]  # fmt: skip
    return {
        **_verdicts(history, pages),
        "wall": time.perf_counter() - started,
        "evaluations": result.evaluations,
        "tickets": result.counts().get("ticket", 0),
        "errors": sum(r.errors for r in result.rules),
    }


def incident_checks(reader, history: FleetHistory) -> dict[str, object]:
    """The evaluator, with triage, as a live one would meet each planted incident: every
    ``CHECK_STEP`` seconds from the incident's start for ``CHECK_SECONDS`` (triage needs the
    alert's onset near the incident's, as a live evaluator sees it), and at two evaluations
    ``for:`` apart at the quiet times between incidents (a fleet too large to backtest a day
    of here). Each incident must page its rule with its cause first, and the quiet times must
    not page."""
    rules, _ = builtin_rule_set(SLOS)
    runs = [tuple(i.start + CHECK_STEP * k for k in range(1, round(CHECK_SECONDS / CHECK_STEP) + 1))
            for i in history.incidents]  # fmt: skip
    runs += [((a.end + b.start) / 2 - 150.0, (a.end + b.start) / 2)
             for a, b in itertools.pairwise(history.incidents)]  # fmt: skip
    pages: list[tuple[str, float, str]] = []
    started, evaluations = time.perf_counter(), 0
    for times in runs:
        state = MemoryAlertState()
        explain = triage_explainer(reader, None, state, rules)
        evaluator = Evaluator(rules, reader, state, explain=explain)
        for now in times:
            result = evaluator.evaluate_once(now)
            evaluations += 1
            for alert in result.alerts:
                rule = rule_of(alert, rules)
                if (
                    alert.state is AlertState.FIRING
                    and rule is not None
                    and rule.severity == "page"
                ):
                    pages.append((rule.name, now, alert.cause))
    return {
        **_verdicts(history, pages),
        "wall": time.perf_counter() - started,
        "evaluations": evaluations,
        "tickets": "-",
        "errors": 0,
    }


def _verdicts(history: FleetHistory, pages: list[tuple[str, float, str]]) -> dict[str, object]:
    found: dict[str, list[str]] = {}
    stray = []
    for rule, at, cause in pages:
        incident = next((i for i in history.incidents if i.start <= at <= i.end + 600.0), None)
        if incident is None:
            stray.append(f"{rule} at {iso(at)}")
        elif rule == incident.rule:
            found.setdefault(incident.kind, []).append(cause)
    verdicts = []
    for incident in history.incidents:
        # NOTE: the cause triage named for the page (an alert it could not explain at its
        # first firing is explained again, as the live evaluator does)
        causes = [c for c in found.get(incident.kind, []) if c] or found.get(incident.kind, [])
        verdicts.append(
            f"{incident.kind}: "
            + ("MISSED" if not causes else f"{incident.rule} paged, cause {causes[0] or '(none)'}")
            + ("" if not causes or causes[0] == incident.cause else " (WRONG)")
        )
    right = sum(
        1
        for i in history.incidents
        if i.cause in found.get(i.kind, [])[:1] + [c for c in found.get(i.kind, []) if c][:1]
    )
    return {"verdicts": verdicts, "right": right, "stray": stray}


#: The longest wait for the server to merge the backfilled blocks (:func:`compacted`).
COMPACTION_WAIT_SECONDS = 300.0


def _tsdb_gauge(client: httpx.Client, url: str, name: str) -> float:
    """The value of the server's own sample ``name`` (0 where it has none)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = client.get(f"{url}/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return float(sample.value)
    return 0.0


def compacted(url: str) -> float:
    """Seconds waited until the server has run a compaction (a minute after it starts, it
    merges the backfilled record blocks that overlap its raw ones, 25 at a time) and its
    loaded blocks have held still for 15 s, so that no timed read runs during that merge or
    across ~25 overlapping blocks; at most :data:`COMPACTION_WAIT_SECONDS`."""
    started = time.perf_counter()
    still_since, blocks = started, -1.0
    with httpx.Client(timeout=30) as client:
        while time.perf_counter() - started < COMPACTION_WAIT_SECONDS:
            ran = _tsdb_gauge(client, url, "prometheus_tsdb_compactions_triggered_total")
            now_blocks = _tsdb_gauge(client, url, "prometheus_tsdb_blocks_loaded")
            if now_blocks != blocks:
                still_since, blocks = time.perf_counter(), now_blocks
            if ran >= 1 and time.perf_counter() - still_since >= 15:
                break
            time.sleep(1)
    return time.perf_counter() - started


def renders(
    metrics_url: str | None, store_url: str, until: float, repeats: int
) -> dict[tuple, float]:
    """Overview and SLOs, 1 h and 24 h, cold and warm: median wall seconds of ``repeats``."""
    with tempfile.TemporaryDirectory(prefix="tailwatch-fleet-") as folder:
        config = Path(folder) / "tailwatch.yaml"
        config.write_text(console_render.SLO_YAML, encoding="utf-8")
        env = {"TAILWATCH_METRICS_URL": metrics_url} if metrics_url else {}
        rows, _ = console_render.measure(store_url, config, until, repeats, env)
    for row in rows:  # NOTE: a page that stopped early (no store, no data) drew nothing
        if row[0] == "Overview" and not row[7]:
            raise RuntimeError(f"the Overview drew no chart: {row}")
    return {(row[0], row[1], row[2]): float(row[3]) / 1000 for row in rows if row[1] != "-"}


def up_to_first_overview(url: str) -> float:
    """``tailwatch up --prometheus url`` from its start to the Overview's first chart drawn in
    headless Chromium (the page polled until the console answers)."""
    from playwright.sync_api import sync_playwright

    from tests.console.test_browser import chromium_binary, open_page

    port = free_port()
    with tempfile.TemporaryDirectory(prefix="tailwatch-up-") as folder:
        db = sqlite_url(Path(folder) / "store.db")
        command = [sys.executable, "-m", "tailwatch", "up", "--prometheus", url, "--db", db]
        command += ["--console-port", str(port)]
        log = (Path(folder) / "up.log").open("wb")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium_binary(), args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            started = time.perf_counter()
            process = subprocess.Popen(
                command, cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )  # fmt: skip
            try:
                console = f"http://127.0.0.1:{port}"
                while True:
                    if process.poll() is not None:
                        raise RuntimeError(
                            "up exited: " + (Path(folder) / "up.log").read_text()[-2000:]
                        )
                    with contextlib.suppress(httpx.HTTPError):
                        if httpx.get(f"{console}/_stcore/health", timeout=2).text == "ok":
                            break
                    if time.perf_counter() - started > 600:
                        raise RuntimeError("the console did not start in 10 minutes")
                    time.sleep(0.2)
                open_page(page, console)
                charts = page.locator('[data-testid="stVegaLiteChart"]')
                charts.first.locator("canvas, svg").first.wait_for(timeout=300_000)
                return time.perf_counter() - started
            finally:
                browser.close()
                stop_process(process)
                log.close()


# --- the run ---------------------------------------------------------------------------------


def measure_fleet(replicas: int, end: float, work: Path, with_up: bool) -> list[dict]:
    history = FleetHistory(replicas, end=end, hours=HOURS)
    print(
        f"\n{replicas} replicas: {replicas * SERIES_PER_REPLICA:,} series, "
        f"{history.samples:,} samples over {HOURS:g} h at {history.interval:g} s",
        flush=True,
    )
    out = []
    folder = work / f"fleet-{replicas}"
    tsdb, loaded = load_prometheus(history, folder / "prometheus")
    print(f"  Prometheus loaded in {loaded:.0f} s ({_size(tsdb)})", flush=True)
    with prometheus_over(tsdb, folder / "prometheus") as server:
        out.append(_measure_server("Prometheus 2.42", history, server, loaded, with_up))
        recorded = backfill_records(history, server.url, folder / "records")
    shutil.copytree(recorded, tsdb, dirs_exist_ok=True)
    with prometheus_over(tsdb, folder / "prometheus") as server:
        settled = compacted(server.url)
        print(f"  Prometheus merged the backfilled blocks in {settled:.0f} s after its start",
              flush=True)  # fmt: skip
        _with_records(out[-1], "Prometheus with records", history, server)
    with victoriametrics_over(folder / "vm-data", folder / "vm") as server:
        loaded = load_victoriametrics(history, server.url)
        print(f"  VictoriaMetrics loaded in {loaded:.0f} s", flush=True)
        out.append(_measure_server("VictoriaMetrics 1.79", history, server, loaded, False))
        replayed = replay_records(history, server.url, folder / "vm-records")
        print(f"  vmalert replayed the exported recording rules in {replayed:.0f} s", flush=True)
        _with_records(out[-1], "VictoriaMetrics with records", history, server)
    if replicas in SQLITE_REPLICAS:
        path = folder / "sqlite" / "store.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        loaded = load_sqlite(history, path)
        print(f"  SQLite loaded in {loaded:.0f} s ({_size(path)})", flush=True)
        store = Store(sqlite_url(path))
        try:
            cycle = evaluation_cycles(sqlite_url(path), history.end, None)
            tested = incident_checks(store, history)
        finally:
            store.close()
        shown = renders(None, sqlite_url(path), history.end, _repeats(replicas))
        out.append(_row("SQLite (embedded)", history, loaded, cycle, shown, tested, None))
        _say("SQLite (embedded)", out[-1])
    return out


def _with_records(row: dict, name: str, history: FleetHistory, server) -> None:
    """A cycle and the page renders on ``server`` once it holds the exported records, into
    ``row`` (``recorded``, ``recorded_shown``)."""
    cycle = evaluation_cycles(server.url, history.end, server.pid)
    _progress(name, f"cycle {cycle['wall']:.2f} s")
    own = sqlite_url(Path(tempfile.mkdtemp(prefix="tailwatch-own-")) / "own.db")
    Store(own).close()
    shown = renders(server.url, own, history.end, _repeats(history.replicas))
    row["recorded"], row["recorded_shown"] = cycle, shown
    print(
        f"  {name}: cycle {cycle['wall']:.2f} s wall, {cycle['cpu']:.3f} s CPU, "
        f"{cycle['queries']:.0f} queries; Overview 24h cold {shown['Overview', '24h', 'cold']:.2f} s",
        flush=True,
    )


def _repeats(replicas: int) -> int:
    return 3 if replicas <= 16 else 1


def _measure_server(name, history, server, loaded, with_up) -> dict:
    cycle = evaluation_cycles(server.url, history.end, server.pid)
    _progress(name, f"cycle {cycle['wall']:.2f} s")
    with PrometheusReader(server.url) as reader:
        tested = (
            backtest_day(reader, history)
            if history.replicas in BACKTEST_REPLICAS and name.startswith("Prometheus")
            else incident_checks(reader, history)
        )
    _progress(name, f"{tested['evaluations']} evaluations in {tested['wall']:.0f} s")
    own = sqlite_url(Path(tempfile.mkdtemp(prefix="tailwatch-own-")) / "own.db")
    Store(own).close()  # NOTE: migrated and empty: the console reads its own records there
    shown = renders(server.url, own, history.end, _repeats(history.replicas))
    _progress(name, "pages rendered")
    up = up_to_first_overview(server.url) if with_up else None
    row = _row(name, history, loaded, cycle, shown, tested, up)
    _say(name, row)
    return row


def _progress(name: str, what: str) -> None:
    """A line on stderr as each part ends: a 500-replica run takes an hour."""
    print(f"  ... {name}: {what} ({time.strftime('%H:%M:%S')})", file=sys.stderr, flush=True)


def _say(name: str, row: dict) -> None:
    cycle, tested = row["cycle"], row["tested"]
    print(
        f"  {name}: cycle {cycle['wall']:.2f} s wall, {cycle['cpu']:.3f} s CPU, "
        f"{cycle['queries']:.0f} queries; Overview 24h cold {row['shown']['Overview', '24h', 'cold']:.1f} s; "
        f"{tested['evaluations']} evaluations: {'; '.join(tested['verdicts'])}; "
        f"other pages {len(tested['stray'])}"
        + ("" if row["up"] is None else f"; up to Overview {row['up']:.1f} s"),
        flush=True,
    )


def _row(store, history, loaded, cycle, shown, tested, up) -> dict:
    return {"store": store, "replicas": history.replicas, "loaded": loaded, "cycle": cycle,
            "shown": shown, "tested": tested, "up": up}  # fmt: skip


def _size(path: Path) -> str:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return f"{sum(p.stat().st_size for p in files) / 2**20:.0f} MiB"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench fleet_scale")
    parser.add_argument("--replicas", type=int, action="append", help="repeatable; default 16, 100, 500")  # fmt: skip
    parser.add_argument("--skip-up", action="store_true", help="leave out up --prometheus")
    args = parser.parse_args(argv or [])
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    end = float(int(time.time()) // 60 * 60 - 300)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tailwatch-fleet-", dir=ROOT / ".tailwatch") as work:
        for replicas in args.replicas or REPLICA_COUNTS:
            rows += measure_fleet(replicas, end, Path(work), not args.skip_up)
    _print(rows)


def _print(rows: list[dict]) -> None:
    print(f"\n{os.cpu_count()} cores; {HOURS:g} h at 60 s; median of {REPEATS} warm cycles")
    print_table(
        ("store", "replicas", "load s", "cycle cold s", "cycle wall s", "Tailwatch CPU s",
         "share of a core at 15 s", "server CPU s", "queries", "errors"),
        [(r["store"], r["replicas"], f"{r['loaded']:.0f}", f"{r['cycle']['cold_wall']:.2f}",
          f"{r['cycle']['wall']:.2f}", f"{r['cycle']['cpu']:.3f}",
          f"{r['cycle']['cpu'] / TICK:.1%}", f"{r['cycle']['server']:.2f}",
          f"{r['cycle']['queries']:.0f}", f"{r['cycle']['errors']:.0f}") for r in rows],
    )  # fmt: skip
    for r in rows:
        if "recorded" in r:
            k = r["recorded"]
            print(
                f"{r['store']} x {r['replicas']} with the exported recording rules: cycle "
                f"{k['wall']:.2f} s wall, {k['cpu']:.3f} s CPU ({k['cpu'] / TICK:.1%} of a core), "
                f"server CPU {k['server']:.2f} s, {k['queries']:.0f} queries"
            )
    print(
        "\npage render, wall s (median of 3 at 16 replicas, one run at more; AppTest from the entrypoint)"
    )
    keys = [(p, rng, k) for p in ("Overview", "SLOs") for rng in ("1h", "24h") for k in ("cold", "warm")]  # fmt: skip
    shown = [(r["store"], r["shown"], r) for r in rows]
    shown += [(f"{r['store']} with records", r["recorded_shown"], r) for r in rows if "recorded_shown" in r]  # fmt: skip
    print_table(
        ("store", "replicas", *(f"{p} {rng} {k}" for p, rng, k in keys)),
        [(name, r["replicas"], *(f"{s[k]:.2f}" for k in keys)) for name, s, r in shown],
    )
    print(
        f"\nthe planted incidents: a backtest of the day every {BACKTEST_STEP:g} s with triage "
        "(16 replicas, Prometheus), else two evaluations in each incident and at two quiet "
        "times; and up --prometheus to the first Overview"
    )
    print_table(
        ("store", "replicas", "evaluations", "wall s", "incidents paged, cause first",
         "other pages", "tickets", "errors", "up → Overview s"),
        [(r["store"], r["replicas"], r["tested"]["evaluations"], f"{r['tested']['wall']:.0f}",
          f"{r['tested']['right']}/3", len(r["tested"]["stray"]), r["tested"]["tickets"],
          r["tested"]["errors"], "-" if r["up"] is None else f"{r['up']:.1f}") for r in rows],
    )  # fmt: skip
    for r in rows:
        print(f"{r['store']} × {r['replicas']}: {'; '.join(r['tested']['verdicts'])}")
        if r["tested"]["stray"]:
            print(f"  other pages: {', '.join(r['tested']['stray'][:10])}")
    big = [r for r in rows if r["replicas"] == max(x["replicas"] for x in rows) and r["store"] != "SQLite (embedded)"]  # fmt: skip
    for r in big:
        met = [
            ("Overview 24 h cold", r["shown"]["Overview", "24h", "cold"], OVERVIEW_24H_COLD_TARGET),
            ("cycle wall", r["cycle"]["wall"], CYCLE_WALL_TARGET),
            ("cycle CPU share", r["cycle"]["cpu"] / TICK, CYCLE_CPU_SHARE_TARGET),
        ]
        if "recorded" in r:
            met.append(("cycle wall with records", r["recorded"]["wall"], CYCLE_WALL_TARGET))
            met.append(("cycle CPU share with records", r["recorded"]["cpu"] / TICK, CYCLE_CPU_SHARE_TARGET))  # fmt: skip
            met.append(("Overview 24 h cold with records", r["recorded_shown"]["Overview", "24h", "cold"], OVERVIEW_24H_COLD_TARGET))  # fmt: skip
        if r["up"] is not None:
            met.append(("up to Overview", r["up"], UP_TARGET))
        print(
            f"targets, {r['store']} × {r['replicas']}: "
            + "; ".join(
                f"{n} {v:.3g} vs ≤ {t:g}: {'met' if v <= t else 'MISSED'}" for n, v, t in met
            )
        )
