"""The virtual fleet: simulated replicas, the collector's parsing and store, and the
evaluator with triage, all on one virtual clock in one process (docs/loadgen.md,
"The virtual fleet")."""
