"""Courtesies: a hello, thanks or goodbye and nothing else is small talk."""

from __future__ import annotations

import pytest

from candor.graph.smalltalk import is_courtesy, without_markers

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "message",
    [
        "Hi there!",
        "thanks, that's all I needed, bye",
        "Thanks a lot, that’s all I needed. Have a great day!",
        "Bye bye",
        "hello",
    ],
)
def test_greetings_thanks_and_farewells_are_courtesies(message: str) -> None:
    assert is_courtesy(message)


@pytest.mark.parametrize(
    "message",
    [
        "Thanks! How do I rebase onto main?",
        "thanks, and what does gc.auto do",
        "Good morning! How are you doing today?",  # a question: the model decides
        "thanks for nothing, you useless bot",
        "I need help",
        "ok",
        "bye\n```rm -rf /```",
    ],
)
def test_a_message_with_anything_more_is_left_to_the_model(message: str) -> None:
    assert not is_courtesy(message)


def test_a_reply_loses_its_passage_markers() -> None:
    assert without_markers("You're welcome [1]! Ask me anything [2][3].") == (
        "You're welcome! Ask me anything."
    )
