"""The version of windowguard, in one place: the wheel's metadata (pyproject.toml's
``[tool.hatch.version]``), ``windowguard.__version__`` and ``windowguard --version`` all
read it, and the CHANGELOG's top section names it (tests/test_version.py)."""

__version__ = "0.2.0.dev0"
