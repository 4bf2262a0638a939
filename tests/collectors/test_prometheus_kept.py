"""The reader's kept answers: final steps are not asked for again, newer ones are, a span
with a gap is asked for whole, each use of the rows is made once and kept apart, and the rows
kept stay under their bound."""

from __future__ import annotations

from collectors.prometheus.kept import KeptAnswers


def _server(log: list[list[float]]):  # type: ignore[no-untyped-def]
    def fetch(bounds):  # type: ignore[no-untyped-def]
        log.append(list(bounds))
        return {k: [({"t": str(t)}, t)] for k, t in enumerate(bounds[1:]) if t % 120}

    return fetch


def test_only_missing_steps_are_asked_for() -> None:
    log: list[list[float]] = []
    kept = KeptAnswers(clock=lambda: 1000.0, final_after_seconds=300.0)
    first = kept.evaluate("x", [0, 60, 120, 180, 240], _server(log), list, "rows")
    assert log == [[0, 60, 120, 180, 240]]
    assert first == {0: [({"t": "60"}, 60)], 2: [({"t": "180"}, 180)]}  # 120, 240: no rows
    again = kept.evaluate("x", [60, 120, 180, 240, 300], _server(log), list, "rows")
    assert log[1:] == [[240, 300]]
    assert again == {1: [({"t": "180"}, 180)], 3: [({"t": "300"}, 300)]}
    kept.evaluate("y", [0, 60], _server(log), list, "rows")
    assert log[2:] == [[0, 60]], "another expression is another answer"
    made = kept.evaluate("x", [60, 120, 180], _server(log), len, "count")
    assert log[3:] == [[60, 120, 180]], "another use of the rows is kept apart"
    assert made == {1: 1}


def test_steps_not_final_are_asked_again() -> None:
    log: list[list[float]] = []
    kept = KeptAnswers(clock=lambda: 800.0, final_after_seconds=300.0)
    kept.evaluate("x", [300, 420, 540, 660], _server(log), list, "rows")  # final up to 500: 420
    kept.evaluate("x", [300, 420, 540, 660], _server(log), list, "rows")
    assert log == [[300, 420, 540, 660], [420, 540, 660]]


def test_a_gap_is_asked_for_as_one_span() -> None:
    log: list[list[float]] = []
    kept = KeptAnswers(clock=lambda: 10_000.0)
    kept.evaluate("x", [60, 120], _server(log), list, "rows")
    kept.evaluate("x", [180, 240], _server(log), list, "rows")
    got = kept.evaluate("x", [0, 60, 120, 180, 240, 300], _server(log), list, "rows")
    assert log[2:] == [[0, 60, 120, 180, 240, 300]]
    assert sorted(got) == [0, 2, 4]


def test_rows_kept_are_bounded() -> None:
    log: list[list[float]] = []
    kept = KeptAnswers(clock=lambda: 1e9)
    kept.rows_kept = 10
    for name in ("a", "b", "c"):
        kept.evaluate(name, [float(t) for t in range(0, 420, 60)], _server(log), list, "rows")
    assert kept._rows == 6, "a and b dropped, the least recently read first"
    kept.evaluate("c", [float(t) for t in range(0, 420, 60)], _server(log), list, "rows")
    assert len(log) == 3, "the latest expression is the one kept"
    kept.evaluate("a", [float(t) for t in range(0, 420, 60)], _server(log), list, "rows")
    assert len(log) == 4
    kept.evaluate("c", [float(t) for t in range(0, 60 * 30, 60)], _server(log), list, "rows")
    assert kept._rows <= 10, "one expression alone drops its oldest steps"
