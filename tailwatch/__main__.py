"""``python -m tailwatch``: the ``tailwatch`` command (the console starts sweeps this way,
with its own interpreter)."""

from tailwatch.cli import app

if __name__ == "__main__":
    app(prog_name="tailwatch")
