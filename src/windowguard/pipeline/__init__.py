"""The fit pipeline: :class:`~windowguard.pipeline.manager.ContextWindowManager` and the
stages one ``fit()`` passes through (view, count, edit, decide, drop, guard, shrink).

Imports only :mod:`windowguard.core` and :mod:`windowguard.accounting` (see
``docs/architecture.md``).
"""
