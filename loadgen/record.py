"""One request as the client measured it, and its JSONL form."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path


@dataclass
class RequestResult:
    """Times are seconds: ``scheduled_seconds``/``sent_seconds`` from the run's start,
    the rest durations from the send. ``itl_seconds`` holds every gap between streamed
    chunks that carried text. ``status`` is the HTTP status (0: no response);
    ``error`` is empty on success. ``dropped``: never sent (the in-flight cap was hit).
    ``retry_after_seconds``: recorded, not honoured, since the runner is open loop: a retry
    would be a request the schedule does not have."""

    index: int
    scheduled_seconds: float
    sent_seconds: float | None = None
    ttft_seconds: float | None = None
    e2e_seconds: float | None = None
    itl_seconds: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    output_tokens: int = 0
    status: int = 0
    error: str = ""
    replica: str = ""
    tenant: str | None = None
    priority: int | None = None
    stream: str = ""
    response_id: str = ""
    finish_reason: str = ""  # the server's, from the stream's last choice that had one
    retry_after_seconds: float | None = None  # a refusal's Retry-After (delay-seconds form)
    dropped: bool = False

    @property
    def succeeded(self) -> bool:
        return not self.dropped and self.status == 200 and not self.error


def write_jsonl(results: Iterable[RequestResult], path: str | Path) -> None:
    with Path(path).open("w", encoding="utf-8") as out:
        for result in results:
            out.write(json.dumps(asdict(result)) + "\n")


def read_jsonl(path: str | Path) -> Iterator[RequestResult]:
    names = {f.name for f in fields(RequestResult)}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            yield RequestResult(**{k: v for k, v in row.items() if k in names})
