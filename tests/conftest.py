"""Test-wide settings.

Hypothesis runs without deadlines everywhere (DESIGN.md "Packaging and CI"): a 2-core
CI machine running the suite must not turn a slow example into a failure; timing is
measured by the benchmarks in bench/, never asserted in tests.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("windowguard", deadline=None)
settings.load_profile("windowguard")
