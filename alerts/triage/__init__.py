"""Guided triage of an incident: measurements gathered from the store, the evidence table,
ranked causes, the slowest requests and the knob that fixes it."""
