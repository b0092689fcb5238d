"""OpenAI Responses replies: the ``response`` object and its server-sent events.

A fitted reply becomes a ``response`` object (OpenAI API reference, Responses "The
response object"): its text, when there is any, as one ``message`` output item with one
``output_text`` part; each tool call as a ``function_call`` item carrying its ``call_id``
(the id the emulator assigned, ``call_…``), in that order. A reply the budget cut is
``"status": "incomplete"`` with ``incomplete_details.reason = "max_output_tokens"``;
otherwise ``"completed"``. ``usage`` has ``input_tokens`` (the exact prompt count),
``output_tokens`` and ``total_tokens`` with their details.

Streaming follows the API's event sequence ("Streaming events"); every event carries
``type`` (also sent as the SSE ``event:`` line) and a ``sequence_number`` from 0:
``response.created`` and ``response.in_progress`` (status ``in_progress``, no output,
no usage); per message item ``response.output_item.added``,
``response.content_part.added``, ``response.output_text.delta`` pieces,
``response.output_text.done``, ``response.content_part.done``,
``response.output_item.done``; per function call ``response.output_item.added``,
``response.function_call_arguments.delta`` pieces,
``response.function_call_arguments.done``, ``response.output_item.done``; and last
``response.completed`` (or ``response.incomplete``) with the whole response, usage
included. No ``[DONE]`` line: the Responses stream ends when the connection closes.

Item ids are derived from the response id, so the same seed replays the same ids.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ._common import Answer, pieces, sse, stable_id

__all__ = ["render_response", "render_response_stream"]


def _usage(answer: Answer) -> dict[str, Any] | None:
    if answer.usage_omitted:
        return None
    prompt = answer.reported_prompt_tokens
    completion = answer.reply.completion_tokens
    cached = answer.cached_tokens or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def _message(answer: Answer, *, status: str, text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {
        "id": f"msg_{stable_id(answer.response_id, 'message')}",
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content if status == "completed" else [],
    }


def _function_calls(answer: Answer) -> list[dict[str, Any]]:
    return [
        {
            "id": f"fc_{stable_id(answer.response_id, index, call_id)}",
            "type": "function_call",
            "status": "completed",
            "arguments": call.arguments_json(),
            "call_id": call_id,
            "name": call.name,
        }
        for index, (call_id, call) in enumerate(answer.reply.tool_calls)
    ]


def _output(answer: Answer) -> list[dict[str, Any]]:
    reply = answer.reply
    items = []
    if reply.text or not reply.tool_calls:
        items.append(_message(answer, status="completed", text=reply.text))
    return items + _function_calls(answer)


def _response(
    answer: Answer, body: Mapping[str, Any], *, status: str, output: list[dict[str, Any]]
) -> dict[str, Any]:
    truncated = answer.reply.truncated
    tools = body.get("tools")
    instructions = body.get("instructions")
    return {
        "id": f"resp_{answer.response_id}",
        "object": "response",
        "created_at": answer.created,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": (
            {"reason": "max_output_tokens"} if truncated and status == "incomplete" else None
        ),
        "instructions": instructions if isinstance(instructions, str) else None,
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": None,
        "model": answer.model,
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True) is not False,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": body.get("store", True) is not False,
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": list(tools) if isinstance(tools, list) else [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": _usage(answer) if status in ("completed", "incomplete") else None,
        "user": None,
        "metadata": body.get("metadata") or {},
    }


def _final_status(answer: Answer) -> str:
    return "incomplete" if answer.reply.truncated else "completed"


def render_response(answer: Answer, body: Mapping[str, Any]) -> dict[str, Any]:
    """The ``response`` object for a fitted reply.

    Args:
        answer: the fitted reply and its counts.
        body: the request body (its parameters are echoed, as the API does).
    """
    return _response(answer, body, status=_final_status(answer), output=_output(answer))


def render_response_stream(answer: Answer, body: Mapping[str, Any]) -> Iterator[bytes]:
    """The server-sent events for a fitted reply (see the module docstring).

    Args:
        answer: the fitted reply and its counts.
        body: the request body (its parameters are echoed, as the API does).
    """
    sequence = 0

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal sequence
        data = {"type": kind, "sequence_number": sequence, **fields}
        sequence += 1
        return sse(data, event=kind)

    opening = _response(answer, body, status="in_progress", output=[])
    yield event("response.created", response=opening)
    yield event("response.in_progress", response=opening)
    output = _output(answer)
    for index, item in enumerate(output):
        item_id = item["id"]
        if item["type"] == "message":
            text = item["content"][0]["text"]
            added = _message(answer, status="in_progress", text=text)
            yield event("response.output_item.added", output_index=index, item=added)
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            where = {"item_id": item_id, "output_index": index, "content_index": 0}
            yield event("response.content_part.added", **where, part=part)
            for piece in pieces(text):
                yield event("response.output_text.delta", **where, delta=piece, logprobs=[])
            yield event("response.output_text.done", **where, text=text, logprobs=[])
            yield event("response.content_part.done", **where, part=item["content"][0])
        else:
            added = dict(item, status="in_progress", arguments="")
            yield event("response.output_item.added", output_index=index, item=added)
            for piece in pieces(item["arguments"], size=16):
                yield event(
                    "response.function_call_arguments.delta",
                    item_id=item_id,
                    output_index=index,
                    delta=piece,
                )
            yield event(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=index,
                name=item["name"],
                arguments=item["arguments"],
            )
        yield event("response.output_item.done", output_index=index, item=item)
    status = _final_status(answer)
    final = _response(answer, body, status=status, output=output)
    yield event(f"response.{status}", response=final)
