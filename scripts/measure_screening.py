"""What the screening classifier decides on messages it was not trained on.

    python scripts/measure_screening.py data/eval/git-doc-questions.jsonl \
        data/eval/sqlite-doc-questions.jsonl

For each evaluation set (read only: nothing here trains on it), and for the
probes in data/screening/probes.jsonl (questions that name insults, abuse,
attacks or killing, and insults and threats, none of them among the examples):
how many messages the classifier screens without the model, how many of those it
routes wrong, how many abusive messages it clears (they would reach no model),
and how many it flags for the focused moderation call. Then the kind accuracy and
calibration (Brier score, expected calibration error) on the evaluation sets.

An evaluation question's route: greeting -> greeting, code_request ->
code_request, abusive -> flagged by the moderation, every other kind -> a search
(question or follow_up).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from candor.screening import policy
from candor.screening.classifier import KINDS, Floats, Screen, shipped
from candor.settings import Settings
from scripts.train_screening import expected_calibration_error

ROOT = Path(__file__).resolve().parents[1]
PROBES = ROOT / "data" / "screening" / "probes.jsonl"
SEARCHED = ("question", "follow_up")


def expected(kind: str) -> tuple[str, ...]:
    return {"greeting": ("greeting",), "code_request": ("code_request",)}.get(kind, SEARCHED)


def routed_right(screen: Screen, kind: str) -> bool:
    return kind != "abusive" and screen.kind in expected(kind)


def measure_set(path: Path, confidence: float) -> list[str]:
    questions = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    model = shipped()
    lines = [f"{path.name}: {len(questions)} questions"]
    by_kind: dict[str, Counter[str]] = {}
    probabilities, labels, right = [], [], []
    for question in questions:
        kind = question["kind"]
        screen = model.screen(question["question"])
        outcome = policy.outcome(screen, confidence)
        counts = by_kind.setdefault(kind, Counter())
        counts["n"] += 1
        counts[outcome] += 1
        if outcome == "sure" and not routed_right(screen, kind):
            counts["sure_wrong"] += 1
            lines.append(f"  screened wrong: {question['id']} {kind} -> {screen}")
        if kind == "abusive" and outcome == "sure":
            counts["abusive_cleared"] += 1
        if kind != "abusive":
            kinds = _kind_probabilities(question["question"])
            target = expected(kind)[0]
            probabilities.append(kinds)
            labels.append(KINDS.index(target))
            right.append(screen.kind in expected(kind))
    total: Counter[str] = Counter()
    for kind in sorted(by_kind):
        counts = by_kind[kind]
        total.update(counts)
        lines.append(_row(kind, counts))
    lines.append(_row("all", total))
    kinds_p = np.array(probabilities)
    onehot = np.eye(len(KINDS))[np.array(labels)]
    correct = np.array(right)
    lines.append(
        f"  kind (not abusive, n={len(right)}): routes right {correct.mean():.3f}, "
        f"Brier {np.mean(np.sum((kinds_p - onehot) ** 2, axis=1)):.3f}, "
        f"ECE {expected_calibration_error(kinds_p.max(axis=1), correct):.3f}"
    )
    return lines


def _kind_probabilities(message: str) -> Floats:
    from candor.screening.classifier import softmax

    model = shipped()
    return softmax(model.logits(message)[: len(KINDS)], model.kind_temperature)


def _row(kind: str, counts: Counter[str]) -> str:
    n = counts["n"]
    return (
        f"  {kind:13s} n={n:3d}  screened without the model {counts['sure']:3d} "
        f"({counts['sure'] / n:.0%}), of them routed wrong {counts['sure_wrong']}; "
        f"to moderation {counts['flagged']}; to triage {counts['unsure']}; "
        f"abusive cleared {counts['abusive_cleared']}"
    )


def measure_probes(path: Path, confidence: float) -> list[str]:
    probes = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    model = shipped()
    lines = [f"{path.name}: {len(probes)} probes"]
    for abusive in (False, True):
        group = [p for p in probes if p["abusive"] is abusive]
        outcomes = Counter(policy.outcome(model.screen(p["text"]), confidence) for p in group)
        name = "insults and threats" if abusive else "questions naming abuse, attacks, kill"
        lines.append(
            f"  {name} (n={len(group)}): screened without the model {outcomes['sure']}, "
            f"to triage {outcomes['unsure']}, to moderation {outcomes['flagged']}"
        )
        for probe in group:
            screen = model.screen(probe["text"])
            outcome = policy.outcome(screen, confidence)
            if (outcome == "sure") is abusive or outcome != "sure":
                lines.append(
                    f"    {outcome:7s} {screen.kind:12s} p(kind) {screen.confidence:.2f} "
                    f"p(abusive) {screen.abusive:.3f} {probe['text']!r}"
                )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="*", type=Path, help="evaluation question sets (JSONL)")
    parser.add_argument("--probes", type=Path, default=PROBES)
    parser.add_argument(
        "--confidence",
        type=float,
        default=Settings.model_fields["screening_confidence"].default,
    )
    args = parser.parse_args(argv)
    lines = [f"confidence {args.confidence}, abuse clear {policy.ABUSE_CLEAR}"]
    for path in args.sets:
        lines += measure_set(path, args.confidence)
    lines += measure_probes(args.probes, args.confidence)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
