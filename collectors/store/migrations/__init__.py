"""Alembic environment and revisions of the collectors store."""
