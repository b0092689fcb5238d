"""The run: the sans-I/O loop machine and its drivers, tools, retry, journal, providers,
event sinks, and the conversations the drop-in surfaces follow.

Imports only the pipeline and the layers below it (see ``docs/architecture.md``).
"""
