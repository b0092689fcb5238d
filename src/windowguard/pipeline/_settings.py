"""The manager's defaults and the names its stages share."""

from __future__ import annotations

import logging

from ..accounting.remote import CountQuery
from ._editing import SummaryQuery

logger = logging.getLogger("windowguard")

DEFAULT_FALLBACK_WINDOW = 8192
DEFAULT_MAX_REMOTE_COUNTS = 2
"""Remote counts one send may ask for (a confirmation, then the pruned request)."""
LOCAL_CALIBRATION_SEED = 1.0
"""Local exact counts start uncalibrated: they are the template's own count, within a
token or two; their factor grows only if reports show them short."""
DEFAULT_HOLD_TURNS = 4
"""A low-water prune must free room for this many typical turns (decision 0003)."""
MISMATCH_TOLERANCE = 0.02
"""How far a report may differ from the local exact count of the same request (plus 8
tokens) before a ``usage_mismatch`` event says so."""

RemoteAnswer = int | BaseException
Query = CountQuery | SummaryQuery
"""What :meth:`ContextWindowManager.fit_steps` asks its driver for."""
