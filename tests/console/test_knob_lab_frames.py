"""The knob lab's pure parts: the knee of each line, defensive reads of stored summaries,
knob matching for the headroom, the replay comparison's shapes, and the admin client's
messages (through an httpx mock transport) — no Streamlit, no store."""

from __future__ import annotations

import json
import math

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts.triage import KnobChange
from collectors.store.lab_records import LabPoint, LabRun, LabRunKind, LabRunStatus
from console.knob_lab import frames as lab_frames
from console.knob_lab import headroom as lab_headroom
from console.knob_lab import knobs as lab_knobs
from console.knob_lab import replay as lab_replay


def _run(**kw) -> LabRun:
    base = dict(
        kind=LabRunKind.SWEEP, name="s", created_at=100.0, target="tiny", simulated=False,
        knobs={"model": "tiny", "max_num_seqs": 8}, workload={}, sweep_knob="max_num_batched_tokens",
        knob_values=(512, 4096), rates=(1.0, 2.0, 4.0), status=LabRunStatus.FINISHED,
        finished_at=200.0, id=1,
    )  # fmt: skip
    return LabRun(**{**base, **kw})


def _point(value, rate, attainment, repeat=0, **summary) -> LabPoint:
    return LabPoint(1, value, rate, repeat, {"slo_attainment": attainment, **summary})


def test_the_knee_is_the_highest_rate_whose_mean_attainment_passes():
    run = _run()
    points = [
        _point(512, 1.0, 1.0), _point(512, 2.0, 0.95), _point(512, 2.0, 0.80, repeat=1),
        _point(512, 4.0, 0.95), _point(4096, 1.0, 0.5), _point(4096, 2.0, "NaN"),
    ]  # fmt: skip
    curve = lab_frames.sweep_curve(lab_frames.point_rows(run, points))
    order = lab_frames.value_order(run, points)
    # 512 at 2 req/s averages 0.875 (fails) but 4 req/s passes: the highest passing rate
    assert lab_frames.knees(run, points, order) == {
        "max_num_batched_tokens=512": 4.0,
        "max_num_batched_tokens=4096": None,
    }
    at_two = curve[curve["rate"] == 2.0]
    assert dict(zip(at_two["value"], at_two["num_repeats"], strict=True)) == {
        "max_num_batched_tokens=512": 2,
        "max_num_batched_tokens=4096": 1,
    }


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=5),
                    lambda inner: st.dictionaries(st.text(max_size=5), inner, max_size=3)
                    | st.lists(inner, max_size=3), max_leaves=8))  # fmt: skip
def test_a_stored_summary_of_any_shape_reads_as_a_number_or_nan(summary):
    value = lab_frames.number(summary, "ttft_ms", "p95")
    assert math.isnan(value) or math.isfinite(value)


def test_a_sweep_matches_the_current_knobs_on_the_knobs_it_shares():
    run = _run()
    knobs = {"model": "tiny", "max_num_seqs": 8, "max_num_batched_tokens": 4096, "extra": 1}
    assert lab_headroom.matching_value(run, knobs) == (True, 4096)
    assert lab_headroom.matching_value(run, {**knobs, "max_num_batched_tokens": 2048})[0] is False
    assert lab_headroom.mismatches(run, {**knobs, "max_num_seqs": 16}) == [
        "max_num_seqs: 8 in the sweep, 16 now"
    ]
    older = _run(id=2, finished_at=150.0, knobs={"model": "tiny", "max_num_seqs": 16})
    found = lab_headroom.newest_matching([older, run], {**knobs, "max_num_seqs": 16})
    assert found == (older, 4096)
    assert lab_headroom.Headroom(6.2, 10.0).text == "at 62% of the knee"
    assert lab_headroom.Headroom(0.02, 10.0).text == "at 0.2% of the knee"
    assert lab_headroom.Headroom(None, 10.0).text == "—"


def test_only_changes_of_this_target_after_the_sweep_make_it_stale():
    changes = [KnobChange("a", "max_num_seqs", 1, 250.0), KnobChange("a", "x", 1, 150.0),
               KnobChange("b", "max_num_seqs", 1, 300.0)]  # fmt: skip
    assert [k.knob for k in lab_headroom.stale_changes(changes, "a", 200.0)] == ["max_num_seqs"]


def test_a_replay_of_an_unknown_shape_is_named_not_guessed():
    run = _run(kind=LabRunKind.REPLAY, sweep_knob=None, knob_values=())
    good = {"request_goodput": 2.0, "ttft_ms": {"p50": 40.0}}
    compared = lab_replay.replay_frame(
        run,
        [
            LabPoint(1, None, 2.0, 0, {"replay": {**good, "ttft_ms": {"p50": 50.0}},
                                       "production": good}),
            LabPoint(1, None, 2.0, 1, {"replay": 3}),
        ],
    )  # fmt: skip
    p50 = compared.frame[compared.frame["figure"] == "TTFT p50 ms"].iloc[0]
    assert (p50["production"], p50["replay"], p50["replay vs production"]) == (40.0, 50.0, 0.25)
    assert "point 2 has ['replay']" in compared.problem


@pytest.mark.parametrize(
    ("target", "url"),
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("[::1]:9000", "http://[::1]:9000"),
        ("https://engine.local:8443/metrics", "https://engine.local:8443"),
        ("replica-a", None),
        ("host:99999", None),
        ("ftp://x:1", None),
    ],
)
def test_the_engine_url_of_a_target(target, url):
    assert lab_knobs.engine_url(target) == url


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=80))
def test_any_target_name_or_typed_value_is_a_url_or_none_and_a_value_or_error(text):
    url = lab_knobs.engine_url(text)
    assert url is None or url.startswith(("http://", "https://"))
    _, problem = lab_knobs.parse_value(text, 512)
    if not text.strip():
        assert "empty" in problem
    else:
        assert problem == "" or "is not a finite number" in problem, problem


def _transport(status: int, body: dict):
    def handle(request: httpx.Request) -> httpx.Response:
        assert request.headers.get("authorization") == "Bearer t0ken"
        assert "t0ken" not in str(request.url)
        return httpx.Response(status, json=body)

    return httpx.MockTransport(handle)


def _engine_error(status: int, message: str) -> dict:
    return {"error": {"message": message, "type": "x", "param": None, "code": None}}


def test_the_engines_messages_are_shown_as_it_sent_them():
    bad = lab_knobs.patch_knobs(
        "http://e:1", "t0ken", {"max_num_seqs": 0},
        transport=_transport(400, _engine_error(400, "max_num_seqs=0: must be at least 1")),
    )  # fmt: skip
    assert bad.status_code == 400 and "max_num_seqs=0: must be at least 1" in bad.error
    refused = lab_knobs.read_knobs(
        "http://e:1", "t0ken", transport=_transport(401, _engine_error(401, "needs a header"))
    )
    assert (
        "answered 401: needs a header" in refused.error and "TAILWATCH_ADMIN_TOKEN" in refused.error
    )
    ok = lab_knobs.patch_knobs(
        "http://e:1", "t0ken", {"max_num_seqs": 4},
        transport=_transport(200, {"changes": [{"knob": "max_num_seqs", "old": 8, "new": 4}],
                                   "config": {"max_num_seqs": 4}}),
    )  # fmt: skip
    assert not ok.error and ok.knobs == {"max_num_seqs": 4} and len(ok.changes) == 1
    assert "t0ken" not in json.dumps([bad.error, refused.error])


def test_an_unreachable_engine_is_one_message():
    def fail(request):
        raise httpx.ConnectError("refused", request=request)

    reply = lab_knobs.read_knobs("http://e:1", "t0ken", transport=httpx.MockTransport(fail))
    assert reply.error.startswith("cannot reach the engine at http://e:1: ConnectError")
