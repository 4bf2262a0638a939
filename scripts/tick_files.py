"""How many of the project's files one evaluation tick crosses, from the rules' reads to a
notification (issue 23: "following one evaluation tick to a notification").

``python scripts/tick_files.py [--scenario kv-pressure] [--list]`` runs a built-in scenario
on the virtual fleet (``loadgen.virtual``) over a SQLite store, with the built-in rules, page-
time triage and a webhook notifier (its HTTP client on httpx's mock transport: the real
notifier code, no socket), and profiles every evaluation. It prints the files of the project
that the first tick which sent a notification called into, by package. The same command
measures the house before and after a re-layout.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PACKAGES = ("alerts", "bench", "collectors", "console", "engine", "loadgen", "slo", "tailwatch")


def _project_file(filename: str) -> str | None:
    try:
        relative = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return str(relative) if relative.parts[0] in PACKAGES else None


def measure(scenario_name: str) -> list[str]:
    """The project files the first notifying tick of ``scenario_name`` called into."""
    import httpx

    import loadgen.virtual.drill as drill_module
    from alerts.notify import WebhookNotifier
    from loadgen.scenario import load_scenario
    from loadgen.virtual.collect import VirtualStore

    sent: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(1)
        return httpx.Response(200)

    notifier = WebhookNotifier(
        "http://receiver.invalid/hook", client=httpx.Client(transport=httpx.MockTransport(handler))
    )
    base = drill_module.Evaluator
    ticks: list[set[str]] = []

    class ProfiledEvaluator(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("notifiers", [notifier])
            super().__init__(*args, **kwargs)

        def evaluate_once(self, *args, **kwargs):
            files: set[str] = set()
            before = len(sent)

            def profile(frame, event, arg):
                if event == "call":
                    name = _project_file(frame.f_code.co_filename)
                    if name:
                        files.add(name)

            sys.setprofile(profile)
            try:
                return super().evaluate_once(*args, **kwargs)
            finally:
                sys.setprofile(None)
                if len(sent) > before:
                    ticks.append(files)

    drill_module.Evaluator = ProfiledEvaluator
    try:
        with tempfile.TemporaryDirectory() as folder:
            store = VirtualStore.at(f"sqlite:///{folder}/tick.db")
            try:
                drill_module.run_virtual_drill(load_scenario(scenario_name), store=store)
            finally:
                store.close()
    finally:
        drill_module.Evaluator = base
    if not ticks:
        raise SystemExit(f"{scenario_name}: no tick sent a notification")
    return sorted(ticks[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="kv-pressure")
    parser.add_argument("--list", action="store_true", help="print every file")
    args = parser.parse_args(argv)
    files = measure(args.scenario)
    by_package = Counter(Path(f).parts[0] for f in files)
    print(f"one notifying tick ({args.scenario}) crosses {len(files)} project files")
    for package, count in sorted(by_package.items()):
        print(f"  {package:<12} {count}")
    if args.list:
        for name in files:
            print(f"    {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
