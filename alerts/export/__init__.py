"""A rule set as a Prometheus rule file on an engine's real metric names, and generated
``promtool test rules`` files that prove each exported alert fires and stays silent."""

from alerts.export.names import EXPORT_DIALECTS, EngineNames, engines_exposing
from alerts.rules.records import prom_duration

__all__ = ["EXPORT_DIALECTS", "EngineNames", "engines_exposing", "prom_duration"]
