"""What a send keeps of the caller's messages, with the edit stages' copies in place.

``Transcript.sent_from`` visits only the edited copies it keeps (a long run's edited
copies before the cut cost nothing); these tests hold it to the plain definition.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from windowguard.accounting.estimate import Estimator
from windowguard.pipeline._transcript import update_transcript


def _reference(
    messages: list[object], edited: dict[int, object], head_stop: int, kept_from: int
) -> list[object]:
    sent = [edited.get(i, m) for i, m in enumerate(messages)]
    return sent[:head_stop] + sent[kept_from:]


@st.composite
def _cases(draw: st.DrawFn) -> tuple[list[object], dict[int, object], int, int, list[int]]:
    n = draw(st.integers(min_value=1, max_value=60))
    messages: list[object] = [{"role": "user", "content": f"m{i}"} for i in range(n)]
    head_stop = draw(st.integers(min_value=0, max_value=n))
    kept_from = draw(st.integers(min_value=head_stop, max_value=n))
    batches = draw(
        st.lists(st.lists(st.integers(min_value=0, max_value=n - 1), max_size=8), max_size=4)
    )
    edited: dict[int, object] = {}
    order: list[int] = []
    for batch in batches:
        for index in batch:
            edited[index] = {"role": "user", "content": f"edited {index} {len(order)}"}
            order.append(index)
    return messages, edited, head_stop, kept_from, order


@given(_cases())
def test_sent_from_is_the_head_and_the_kept_tail_with_every_copy_in_place(
    case: tuple[list[object], dict[int, object], int, int, list[int]],
) -> None:
    messages, edited, head_stop, kept_from, order = case
    estimator = Estimator("o200k")
    run = update_transcript(None, messages, "openai_chat", None, estimator)
    for index in order:  # copies arrive in any order, a later one replacing an earlier
        run.substitute({index: edited[index]}, estimator)
        # a send between two edits: the next edit must not leave it a stale order
        run.sent_from(messages, head_stop, kept_from)
    got = run.sent_from(messages, head_stop, kept_from)
    want = _reference(messages, edited, head_stop, kept_from)
    assert len(got) == len(want)
    assert all(a is b for a, b in zip(got, want, strict=True))


@given(_cases(), st.integers(min_value=0, max_value=60))
def test_patched_puts_every_copy_in_place_and_nothing_past_the_list(
    case: tuple[list[object], dict[int, object], int, int, list[int]], length: int
) -> None:
    """``patched`` (what a send keeping every turn sends) holds to the same definition:
    the list given, each copy at its index, none past the list's end (a shorter list:
    a start of the transcript)."""
    messages, edited, _, _, order = case
    estimator = Estimator("o200k")
    run = update_transcript(None, messages, "openai_chat", None, estimator)
    for index in order:
        run.substitute({index: edited[index]}, estimator)
        run.patched(list(messages))  # a send between two edits
    given_list = list(messages[:length])
    got = run.patched(given_list)
    want = _reference(messages, edited, 0, 0)[:length]
    assert got is given_list
    assert len(got) == len(want)
    assert all(a is b for a, b in zip(got, want, strict=True))
