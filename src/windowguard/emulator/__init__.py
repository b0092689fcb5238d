"""A local provider emulator that enforces context windows with real tokenizers.

``Emulator`` serves OpenAI-, vLLM-, llama.cpp- or Anthropic-compatible endpoints on
127.0.0.1, counts every prompt exactly (chat-template overhead and tool schemas
included), refuses what the real server refuses with its own status, JSON and wording,
injects faults on a schedule or by seeded probability, answers the servers' own
token-count APIs (vLLM/SGLang/TGI ``/tokenize``, llama.cpp ``/apply-template``,
``count_tokens``, ``responses/input_tokens``, Gemini ``countTokens``: see
:mod:`.counting`), and answers from a scripted policy or a deterministic built-in
scenario::

    from windowguard.emulator import Emulator

    with Emulator(flavor="vllm", context_window=16_384, tokenizer="o200k_base") as emu:
        client = openai.OpenAI(base_url=emu.base_url, api_key="unused")

The command line twin is ``windowguard emulate`` (:func:`windowguard.emulator.cli.main`).
"""

from .faults import Fault as Fault
from .faults import FaultPlan as FaultPlan
from .faults import parse_faults as parse_faults
from .scenarios import CodingAgent as CodingAgent
from .scenarios import EmulatorRequest as EmulatorRequest
from .scenarios import Policy as Policy
from .scenarios import Reply as Reply
from .scenarios import ToolCall as ToolCall
from .scenarios import ToolSpec as ToolSpec
from .scenarios import echo as echo
from .server import DEFAULT_TOKENIZER as DEFAULT_TOKENIZER
from .server import CallRecord as CallRecord
from .server import Emulator as Emulator
from .usage import UsagePlan as UsagePlan

__all__ = [
    "DEFAULT_TOKENIZER",
    "CallRecord",
    "CodingAgent",
    "Emulator",
    "EmulatorRequest",
    "Fault",
    "FaultPlan",
    "Policy",
    "Reply",
    "ToolCall",
    "ToolSpec",
    "UsagePlan",
    "echo",
    "parse_faults",
]
