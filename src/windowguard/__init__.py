"""windowguard keeps LLM agent tool loops inside the model's context window."""

from .catalog import ModelInfo as ModelInfo
from .catalog import lookup_model as lookup_model
from .exceptions import ConfigurationError as ConfigurationError
from .exceptions import ContextTruncatedError as ContextTruncatedError
from .exceptions import InvalidTranscriptError as InvalidTranscriptError
from .exceptions import ModelInfoError as ModelInfoError
from .exceptions import UnknownFormatError as UnknownFormatError
from .exceptions import WindowGuardError as WindowGuardError

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "ContextTruncatedError",
    "InvalidTranscriptError",
    "ModelInfo",
    "ModelInfoError",
    "UnknownFormatError",
    "WindowGuardError",
    "lookup_model",
]
