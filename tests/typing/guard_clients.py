"""``wg.guard(client)`` returns the client's own type: the SDK's methods, overloads and
return types carry through, and a typo is a type error (``mypy --strict``; never run)."""

from __future__ import annotations

from typing import Any, cast

from anthropic import Anthropic, AsyncAnthropic
from anthropic.types import Message
from openai import AsyncOpenAI, AzureOpenAI, OpenAI, Stream
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam
from openai.types.responses import Response
from typing_extensions import assert_type

import windowguard as wg

MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]


def openai_sync() -> None:
    client = wg.guard(OpenAI(api_key="unused"), safety=500, edits=[wg.ClearToolResults()])
    assert_type(client, OpenAI)
    reply = client.chat.completions.create(model="m", messages=MESSAGES)
    assert_type(reply, ChatCompletion)
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert_type(stream, Stream[ChatCompletionChunk])
    assert_type(client.responses.create(model="m", input="hi"), Response)
    client.chat.completions.creat(model="m", messages=MESSAGES)  # type: ignore[attr-defined]
    client.chat.completions.create(model="m", mesages=MESSAGES)  # type: ignore[call-overload]
    assert_type(
        wg.guard(AzureOpenAI(api_key="k", api_version="v", azure_endpoint="e")), AzureOpenAI
    )
    # the guard's own view of one conversation, typed as the client again
    run: OpenAI = cast(Any, client).conversation("ticket-1")
    assert_type(run.chat.completions.create(model="m", messages=MESSAGES), ChatCompletion)


async def openai_async() -> None:
    client = wg.guard(AsyncOpenAI(api_key="unused"))
    assert_type(client, AsyncOpenAI)
    reply = await client.chat.completions.create(model="m", messages=MESSAGES)
    assert_type(reply, ChatCompletion)
    client.chat.completions.creat  # type: ignore[attr-defined]  # noqa: B018


def anthropic_sync() -> None:
    client = wg.guard(Anthropic(api_key="unused"), pruning="minimal")
    assert_type(client, Anthropic)
    reply = client.messages.create(
        model="m", max_tokens=1024, messages=[{"role": "user", "content": "hi"}]
    )
    assert_type(reply, Message)
    client.messages.creat  # type: ignore[attr-defined]  # noqa: B018


async def anthropic_async() -> None:
    client = wg.guard(AsyncAnthropic(api_key="unused"))
    assert_type(client, AsyncAnthropic)
    reply = await client.messages.create(
        model="m", max_tokens=1024, messages=[{"role": "user", "content": "hi"}]
    )
    assert_type(reply, Message)


def not_a_client() -> None:
    wg.guard(object())  # type: ignore[type-var]
    wg.guard(OpenAI(api_key="unused"), safety="500")  # type: ignore[arg-type]
