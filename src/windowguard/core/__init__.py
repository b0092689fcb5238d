"""The pure core: shapes, adapters, turns, budget, the edit stages, prune, shrink, gauge,
and the vocabulary every layer speaks (exceptions, events, the failure classifier).

Nothing here does I/O or knows a run. It imports nothing from the rest of windowguard
(see ``docs/architecture.md``; ``tests/test_layers.py`` keeps it so).
"""
