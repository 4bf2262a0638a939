"""When the selected series were last read, answered by the server in one row: the console
places a rate's span on the scrapes (``console.metric_frames.data_span``) without copying
every series' readings out of a large fleet."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from collectors.canonical import Kind
from collectors.prometheus import queries as q
from collectors.prometheus.api import format_range


class ReadingTimes:
    """Mixed into :class:`collectors.prometheus.reader.PrometheusReader`, whose
    ``_held_sources``, ``_evaluate``, ``_raw`` and ``is_victoriametrics`` it uses."""

    def latest_reading_seconds(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> float | None:
        """The time of the latest stored reading of the selected counter or gauge series
        with ``start <= t <= end`` (``None``: there is none), what ``samples`` would give
        as its latest, from one row. Prometheus: ``max(timestamp(…))`` at ``end`` (a
        sample's own time, within the server's lookback); VictoriaMetrics:
        ``max(tlast_over_time(…[w]))``, whose ``timestamp`` is the step's. Where the
        lookback holds none and the range is longer, the readings are read."""
        if not (math.isfinite(start) and math.isfinite(end)) or end < start:
            return None
        latest = None
        for source, matchers in self._held_sources(family, labels):  # type: ignore[attr-defined]
            if source.kind is Kind.HISTOGRAM and not source.rule.from_sum:
                continue
            name = source.metric + ("_sum" if source.rule.from_sum else "")
            selected = q.selector(name, matchers)
            if self.is_victoriametrics:  # type: ignore[attr-defined]
                expr = f"max(tlast_over_time({selected}[{format_range(end - start + 0.001)}]))"
            else:
                expr = f"max(timestamp({selected}))"
            rows = self._evaluate(expr, [start, end]).get(0, [])  # type: ignore[attr-defined]
            found = [v for _, v in rows if math.isfinite(v)]
            if found:
                t = max(found)
                if start <= t <= end:
                    latest = t if latest is None else max(latest, t)
                continue
            if self.is_victoriametrics:  # type: ignore[attr-defined]
                continue
            # NOTE: nothing in the server's lookback before ``end``: earlier readings of the
            # range, if any, are read
            for _, points in self._raw(re.escape(name), matchers, start, end):  # type: ignore[attr-defined]
                if points:
                    t = points[-1][0]
                    latest = t if latest is None else max(latest, t)
        return latest
