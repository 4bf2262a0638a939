"""Writing generated scenarios as YAML files, all or none: each file is written into a
temporary folder beside its destination and renamed into place only once every one of
them was written, so a full disk or a bad folder leaves no half-written set behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from loadgen.errors import WorkloadError


class _Dumper(yaml.SafeDumper):
    """Safe YAML without anchors: a ramp's phases share one tenants mapping, and a reader
    of the file should see each phase whole, not ``*id001``."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def scenario_yaml(mapping: dict[str, Any]) -> str:
    """A scenario mapping as the YAML text its file holds (keys in the mapping's order)."""
    return yaml.dump(mapping, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=100)


def write_scenarios(mappings: Sequence[dict[str, Any]], directory: str | Path) -> list[Path]:
    """Write each mapping to ``directory/<name>.yaml`` (the folder is created if missing;
    files of the same name are replaced) and return the paths. ``WorkloadError`` naming the
    folder, with nothing left in it, when it cannot be written."""
    folder = Path(directory)
    texts = {f"{m['name']}.yaml": scenario_yaml(m) for m in mappings}
    staging: Path | None = None
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".generating-", dir=folder))
        for name, text in texts.items():
            (staging / name).write_text(text, encoding="utf-8")
        paths = []
        for name in texts:
            os.replace(staging / name, folder / name)
            paths.append(folder / name)
        return paths
    except OSError as error:
        reason = error.strerror or type(error).__name__
        if created and staging is not None:
            shutil.rmtree(folder, ignore_errors=True)  # NOTE: ours, and holding nothing else
        raise WorkloadError(
            str(folder), f"cannot write the scenarios there ({reason}); nothing was written"
        ) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
