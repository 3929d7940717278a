"""The screening classifier (candor.screening): what it decides without the model, and
what it must leave to the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from candor.guards import normalise
from candor.screening import features, policy, verdicts
from candor.screening.classifier import MODEL_PATH, Classifier, Screen, shipped
from candor.settings import Settings
from scripts import train_screening

pytestmark = pytest.mark.unit

CONFIDENCE = Settings.model_fields["screening_confidence"].default
ROOT = Path(__file__).resolve().parents[2]


def outcome(message: str) -> policy.Outcome:
    return policy.outcome(shipped().screen(message), CONFIDENCE)


# Questions that name abuse, insults, attacks or killing are questions. The first
# is the one a visitor was warned for (issue 20); the others are not among the
# training examples.
QUESTIONS_NAMING_ABUSE = (
    "What happens when a visitor sends a second abusive message?",
    "how are insults handled?",
    "How do I terminate a stuck process?",
    "what does kill -9 do?",
    "what is a brute force attack?",
    "destroy the cache",
)


@pytest.mark.parametrize("message", QUESTIONS_NAMING_ABUSE)
def test_a_question_naming_abuse_or_killing_is_a_question_decided_without_the_model(
    message: str,
) -> None:
    screen = shipped().screen(message)

    assert policy.outcome(screen, CONFIDENCE) == "sure", screen
    assert screen.kind == "question"


@pytest.mark.parametrize(
    "message",
    ["you useless bot", "idiot", "I will hurt you", "you are an idiot, how do I push?"],
)
def test_an_insult_or_a_threat_goes_to_the_moderation_call(message: str) -> None:
    assert outcome(message) == "flagged"


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("hi", "greeting"),
        ("thanks", "greeting"),
        ("bye", "greeting"),
        ("how do I reach support?", "contact"),
        ("tell me more", "follow_up"),
        ("an example?", "follow_up"),
        ("What does --force-with-lease do?", "question"),
        (
            'fix this:\nTraceback (most recent call last):\n  File "x.py", line 1\nKeyError: 1',
            "code_request",
        ),
    ],
)
def test_common_messages_are_decided_without_the_model(message: str, kind: str) -> None:
    screen = shipped().screen(message)

    assert policy.outcome(screen, CONFIDENCE) == "sure", screen
    assert screen.kind == kind


def test_a_message_holding_an_insult_is_never_cleared_whatever_the_weights_say() -> None:
    # "stupid question, but ..." may well be harmless; the model decides that.
    sure_of_everything = Screen("question", 0.99, 0.001, offensive=True)

    assert policy.outcome(sure_of_everything, CONFIDENCE) == "unsure"
    assert features.offensive("stupid question, but how do I log out?")
    assert features.offensive("answer me, espèce d'abruti")  # an elided French word
    assert features.offensive("you brain-dead toaster")  # a hyphenated one


def test_words_about_abuse_and_killing_processes_are_not_insults() -> None:
    for message in ("how do I kill them all?", "what is garbage collection?", "abusive users"):
        assert not features.offensive(message), message


def test_a_kind_below_the_confidence_goes_to_the_triage_call() -> None:
    assert policy.outcome(Screen("contact", CONFIDENCE - 0.01, 0.01), CONFIDENCE) == "unsure"
    assert policy.outcome(Screen("contact", CONFIDENCE, 0.01), CONFIDENCE) == "sure"


def test_a_sure_kind_with_some_doubt_about_abuse_goes_to_the_triage_call() -> None:
    doubt = policy.ABUSE_CLEAR + 0.01

    assert policy.outcome(Screen("question", 0.99, doubt), CONFIDENCE) == "unsure"
    assert policy.outcome(Screen("question", 0.99, policy.ABUSE_FLAG), CONFIDENCE) == "flagged"


# The model file.


def test_the_committed_model_was_trained_on_the_committed_examples() -> None:
    # Examples changed without a retrain: run scripts/train_screening.py.
    with np.load(MODEL_PATH) as data:
        assert str(data["examples_sha256"]) == train_screening.examples_digest()


def test_the_evaluation_questions_are_not_among_the_examples() -> None:
    examples = {normalise(e.text) for e in train_screening.load_examples()}
    sets = sorted((ROOT / "data" / "eval").glob("*-questions.jsonl"))  # as the Makefile's
    assert len(sets) == 2
    for path in sets:
        for line in path.read_text("utf-8").splitlines():
            assert normalise(json.loads(line)["question"]) not in examples


def test_a_model_trained_on_other_features_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(features, "VERSION", features.VERSION + 1)
    stale = tmp_path / "model.npz"
    stale.write_bytes(train_screening.model_bytes(shipped(), "digest"))
    monkeypatch.undo()

    with pytest.raises(ValueError, match="train_screening"):
        Classifier.load(stale)


def test_training_the_same_examples_twice_gives_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A short run on a few examples: the same bytes come from the same code path.
    monkeypatch.setattr(train_screening, "STEPS", 20)
    monkeypatch.setattr(train_screening, "LAMBDAS", (1e-4,))
    examples = train_screening.load_examples()[::8]

    first, _ = train_screening.train(examples)
    second, _ = train_screening.train(examples)

    assert train_screening.model_bytes(first, "d") == train_screening.model_bytes(second, "d")


def test_features_are_the_same_in_every_process() -> None:
    # Python's hash() is salted per process: weights trained in one process would
    # read other slots in the next. The features hash with crc32.
    message = "How do I reach support?"
    code = f"from candor.screening import features; print(features.vector({message!r})[0].tolist())"
    env = os.environ | {"PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT / "layers" / "candor")}
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )

    assert json.loads(other.stdout) == features.vector(message)[0].tolist()


# The verdict cache's rules (candor.screening.verdicts).


def test_a_verdict_key_ignores_case_spaces_and_closing_punctuation() -> None:
    key = verdicts.digest("How do I reach support?", chat_model="m")

    assert verdicts.digest("  how do I reach   SUPPORT ", chat_model="m") == key
    assert verdicts.digest("How do I reach sales?", chat_model="m") != key


def test_a_verdict_is_never_served_to_another_chat_model() -> None:
    assert verdicts.digest("hi", chat_model="local") != verdicts.digest("hi", chat_model="gpt")


def test_only_verdicts_that_need_no_conversation_are_kept() -> None:
    assert verdicts.cacheable("contact")
    assert verdicts.cacheable("question")
    assert not verdicts.cacheable("follow_up")


def test_a_stored_verdict_this_code_does_not_read_is_a_miss() -> None:
    assert verdicts.from_json(verdicts.to_json("contact")) == "contact"
    assert verdicts.from_json('{"kind": "follow_up"}') is None
    assert verdicts.from_json('{"kind": "abusive"}') is None
    assert verdicts.from_json("not json") is None
    assert verdicts.from_json("[1]") is None
