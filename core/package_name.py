"""Each stage folder of the repository is a subpackage of `tracelake` and only that: run from the
checkout, `import ingest` would load a second, unrelated copy of the folder's modules."""

from __future__ import annotations


def require_installed_name(name: str, installed_as: str) -> None:
    if name != installed_as:
        folder = installed_as.rsplit(".", 1)[-1]
        raise ModuleNotFoundError(f"{folder}/ is the package {installed_as}: import it under that name "
                                  f"(pip install -e . installs it)", name=name)
