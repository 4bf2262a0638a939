"""Reading a Prometheus-compatible server (Prometheus, Thanos, Mimir, VictoriaMetrics) without
copying it: :class:`PrometheusReader` implements the store's ``MetricsReader`` by pushing each
read down as PromQL (``docs/prometheus.md``)."""

from collectors.prometheus.api import PrometheusSourceError
from collectors.prometheus.reader import PrometheusReader

__all__ = ["PrometheusReader", "PrometheusSourceError"]
