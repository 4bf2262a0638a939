"""Alert rules as data: one frozen dataclass per kind, the built-in set, the ``alerts:`` section
of ``tailwatch.yaml``, and each kind's evaluation over a :class:`~collectors.store.MetricsReader`.
"""
