"""Alembic revisions of the collectors store, oldest first."""
