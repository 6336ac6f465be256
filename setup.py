"""Package layout: the folders rtl/, sim/ and tb/ install as fusionfabric.rtl, .sim and .tb.

Everything else (name, version, dependencies, entry points) is in pyproject.toml. The
package list is computed from the tree, so a new subpackage needs no edit here.
"""

from pathlib import Path

from setuptools import setup

HERE = Path(__file__).parent
MAPPED = ("rtl", "sim", "tb")


def _packages() -> tuple[list[str], dict[str, str]]:
    dirs = {"fusionfabric": "fusionfabric"}
    dirs.update({f"fusionfabric.{top}": top for top in MAPPED})
    packages = []
    for top in ("fusionfabric", *MAPPED):
        for init in sorted((HERE / top).rglob("__init__.py")):
            rel = init.parent.relative_to(HERE)
            if "__pycache__" in rel.parts:
                continue
            name = ".".join(rel.parts)
            packages.append(name if top == "fusionfabric" else f"fusionfabric.{name}")
    return packages, dirs


packages, package_dir = _packages()
setup(packages=packages, package_dir=package_dir)
