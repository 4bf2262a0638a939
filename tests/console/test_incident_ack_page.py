"""The Incidents page's acknowledge form (AppTest): with the admin token it records who is on
an open incident, shown in the header and in the list's "acknowledged by" column, and undoes
it; a wrong token or an empty name changes nothing; a resolved incident has no form."""

from __future__ import annotations

import time

import pytest

from alerts import Alert, AlertState, Transition
from alerts.sql import alert_state_of
from collectors.store import Store, sqlite_url
from console.page_kit import INCIDENTS_PAGE
from console.settings import ADMIN_TOKEN_ENV, CONFIG_ENV, LIVE_ENV
from tests.console.test_pages import APP

TOKEN = "right-token"


@pytest.fixture
def firing(tmp_path, monkeypatch) -> str:
    """A store with one firing incident (id 1); the console pointed at it, with a token."""
    url = sqlite_url(tmp_path / "ack.db")
    store = Store(url)
    now = time.time()
    alert = Alert.pending({"alertname": "KVSaturation", "severity": "page"}, now - 120)
    alert = alert.fire(now - 60, value=0.97)
    moved = Transition(now - 60, alert.fingerprint, AlertState.PENDING, AlertState.FIRING, alert)
    alert_state_of(store).save_evaluation([alert], [moved], at_seconds=now - 60)
    store.close()
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.setenv(LIVE_ENV, "0")
    monkeypatch.setenv(ADMIN_TOKEN_ENV, TOKEN)
    monkeypatch.setenv("TAILWATCH_DB_URL", url)
    return url


def _page(**params: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(INCIDENTS_PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _press(at, label: str, by: str, token: str, comment: str = ""):
    at.text_input(key="ack_by").input(by)
    at.text_input(key="ack_comment").input(comment)
    at.text_input(key="ack_token").input(token)
    (button,) = [b for b in at.button if b.label == label]
    button.click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _ack(url: str):
    store = Store(url, migrate=False)
    try:
        return alert_state_of(store).incident(1).ack
    finally:
        store.close()


def _markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_acknowledge_shows_in_the_header_and_list_and_can_be_undone(firing: str) -> None:
    at = _page(id="1")
    assert "not acknowledged" in _markdown(at)
    before = time.time()
    at = _press(at, "Acknowledge", "alice", TOKEN, "on <b>KV</b>")
    ack = _ack(firing)
    assert ack is not None and (ack.by, ack.comment) == ("alice", "on <b>KV</b>")
    assert before - 10 <= ack.at_seconds <= time.time()
    assert any("Acknowledged by alice" in s.value.replace("\\", "") for s in at.success)
    header = _markdown(at)
    assert "acknowledged\\] by **alice**" in header or "acknowledged] by **alice**" in header
    assert "<b>" not in header  # the comment is escaped text
    listed = _page().dataframe[0].value
    assert list(listed["acknowledged_by"]) == ["alice"]
    # acknowledging again updates who, and says whose it was
    at = _press(_page(id="1"), "Acknowledge", "bob", TOKEN)
    assert any("updated: it was alice's" in s.value.replace("\\", "") for s in at.success)
    assert _ack(firing).by == "bob"
    at = _press(_page(id="1"), "Unacknowledge", "bob", TOKEN)
    assert _ack(firing) is None
    assert any("Unacknowledged by bob" in s.value.replace("\\", "") for s in at.success)
    assert list(_page().dataframe[0].value["acknowledged_by"]) == [""]


def test_a_wrong_token_or_an_empty_name_changes_nothing(firing: str) -> None:
    at = _press(_page(id="1"), "Acknowledge", "alice", "wrong-token")
    assert any("Not acknowledged: the admin token is wrong" in e.value for e in at.error)
    at = _press(_page(id="1"), "Acknowledge", "   ", TOKEN)
    assert any("Not acknowledged" in e.value and "by" in e.value for e in at.error)
    assert _ack(firing) is None


def test_a_resolved_incident_has_no_acknowledge_form(firing: str) -> None:
    store = Store(firing)
    state = alert_state_of(store)
    (alert,) = state.active_alerts()
    done = alert.resolve(time.time())
    state.save_evaluation(
        [], [Transition(time.time(), done.fingerprint, AlertState.FIRING, done.state, done)]
    )
    store.close()
    at = _page(id="1")
    assert not [b for b in at.button if b.label == "Acknowledge"]
    assert any("cannot be acknowledged" in c.value for c in at.caption)
