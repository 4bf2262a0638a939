"""Evidence rows about the time between the engines and the clients: the first token as the
clients saw it (a gateway's or the load generator's ``client_ttft_seconds``), its gap over
the engines' own TTFT p95, and the share of the clients' wait that gap is.

A saturated proxy, a misrouted region or TLS/auth added in front (``Cause.CLIENT_GAP``)
shows as a client tail that rose while the engines' did not: the gap and its share grow.
A constant overhead is in both windows (no change); an engine incident moves the engines'
tail with the clients' (the share falls). Fleet-wide: a gateway's series belong to no
replica. Without client timings every row is unknown.
"""

from __future__ import annotations

from alerts.triage.data import Measure, Measurements, TriageInput
from alerts.triage.evidence_rows import ChangeKind, EvidenceKey, EvidenceRow, make_row, ratio


def client_gap(m: Measurements) -> Measure:
    """Client TTFT p95 minus the engines' TTFT p95 (seconds); unknown without both."""
    client, server = m.client_ttft_p95_seconds, m.ttft_p95_seconds
    if not (client.is_known and server.is_known):
        return Measure(note=client.note)
    return Measure(client.value - server.value, client.source, client.note)


def gap_rows(data: TriageInput) -> list[EvidenceRow]:
    """The clients' TTFT p95, the gap over the engines' and its share of the clients'."""
    inc, base = data.fleet.incident, data.fleet.baseline
    R, D = ChangeKind.RATIO, ChangeKind.DIFFERENCE
    return [
        make_row(
            EvidenceKey.CLIENT_TTFT_P95,
            "client TTFT p95",
            inc.client_ttft_p95_seconds,
            base.client_ttft_p95_seconds,
            R,
        ),
        make_row(
            EvidenceKey.CLIENT_GAP,
            "client TTFT gap (p95s)",
            client_gap(inc),
            client_gap(base),
            D,
        ),
        make_row(
            EvidenceKey.CLIENT_GAP_SHARE,
            "gap share of client p95",
            ratio(client_gap(inc), inc.client_ttft_p95_seconds),
            ratio(client_gap(base), base.client_ttft_p95_seconds),
            D,
        ),
    ]
