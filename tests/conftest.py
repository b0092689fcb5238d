"""Test-wide settings.

Hypothesis runs without deadlines everywhere (DESIGN.md "Packaging and CI"): a 2-core
CI machine running the suite must not turn a slow example into a failure; timing is
measured by the benchmarks in bench/, never asserted in tests.

Tests never leave this machine: LiteLLM (an integration under test) fetches its model
cost map from GitHub on import unless told to read its bundled copy.
"""

from __future__ import annotations

import os

from hypothesis import settings

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

settings.register_profile("windowguard", deadline=None)
settings.load_profile("windowguard")
