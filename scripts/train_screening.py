"""Rebuild the screening classifier (candor/screening/model.npz) from its examples.

    python scripts/train_screening.py            # train, report, write the model
    python scripts/train_screening.py --check    # train, report, fail if the file differs

The examples (data/screening/examples.jsonl) were written for the purpose; no
evaluation question is among them. A fixed share of them, drawn with a fixed seed
in each (kind, abusive) group, is held back: the model is trained on the rest,
and its accuracy and calibration are reported on the held-back messages, which
neither the training nor the choice of its settings saw.

On the training part: the L2 strength is chosen by cross-validation (mean
log-loss over FOLDS folds), and each head's temperature is fitted on the
cross-validated logits, so that its probabilities mean what they say on messages
it was not trained on. The final model is trained on the whole training part.
Everything is deterministic (a fixed split, zero initial weights, a fixed number
of steps), and the file is written with fixed zip timestamps: the same examples
give the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import itertools
import json
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from candor.screening import features, policy
from candor.screening.classifier import (
    DOCUMENT_KINDS,
    KINDS,
    MODEL_PATH,
    Classifier,
    Floats,
    sigmoid,
    softmax,
    sure_of,
)
from candor.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "data" / "screening" / "examples.jsonl"
SEED = 20
HELD_BACK = 0.2
FOLDS = 5
LAMBDAS = (3e-5, 1e-4, 3e-4)
# Abusive examples count this many times in the abuse head's loss: an insult the
# classifier clears reaches no model at all, a clean message it doubts costs one call.
ABUSE_WEIGHT = 3.0
STEPS = 500
TEMPERATURES = np.exp(np.linspace(np.log(0.2), np.log(5.0), 161))
BINS = 10
# The confidence levels whose screened share and errors are reported.
LEVELS = (0.8, 0.85, 0.9, 0.95)
DEFAULT_CONFIDENCE = Settings.model_fields["screening_confidence"].default


@dataclass(frozen=True, slots=True)
class Example:
    text: str
    kind: str
    abusive: bool


def load_examples(path: Path = EXAMPLES) -> list[Example]:
    examples = [Example(**json.loads(line)) for line in path.read_text("utf-8").splitlines()]
    unknown = {e.kind for e in examples} - set(KINDS)
    if unknown:
        raise ValueError(f"unknown kinds in {path}: {sorted(unknown)}")
    return examples


def examples_digest(path: Path = EXAMPLES) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def split(examples: Sequence[Example], *, seed: int = SEED) -> tuple[list[int], list[int]]:
    """Indices of the training and held-back examples: HELD_BACK of each group."""
    rng = np.random.default_rng(seed)
    groups: dict[tuple[str, bool], list[int]] = {}
    for i, example in enumerate(examples):
        groups.setdefault((example.kind, example.abusive), []).append(i)
    held: set[int] = set()
    for key in sorted(groups):
        members = np.array(groups[key])
        rng.shuffle(members)
        held.update(int(i) for i in members[: max(1, round(len(members) * HELD_BACK))])
    train = [i for i in range(len(examples)) if i not in held]
    return train, sorted(held)


class Rows:
    """Feature rows of some messages, sparse: what a step of training multiplies."""

    def __init__(self, messages: Sequence[str]) -> None:
        vectors = [features.vector(m) for m in messages]
        self.count = len(messages)
        self.rows = np.concatenate([np.full(len(ix), r) for r, (ix, _) in enumerate(vectors)])
        self.cols = np.concatenate([ix for ix, _ in vectors])
        self.values = np.concatenate([v for _, v in vectors]).astype(np.float64)
        self._starts = np.searchsorted(self.rows, np.arange(self.count))

    def times(self, weights: Floats) -> Floats:
        """rows @ weights"""
        products = weights[self.cols] * self.values[:, None]
        result: Floats = np.add.reduceat(products, self._starts, axis=0)
        return result

    def transposed_times(self, gradient: Floats) -> Floats:
        """rows.T @ gradient"""
        columns = [
            np.bincount(
                self.cols,
                weights=self.values * gradient[self.rows, k],
                minlength=features.DIMENSIONS,
            )
            for k in range(gradient.shape[1])
        ]
        return np.stack(columns, axis=1)

    def spectral_norm(self, iterations: int = 30) -> float:
        """The rows' largest singular value, by power iteration from a fixed start."""
        vector = np.ones((features.DIMENSIONS, 1))
        for _ in range(iterations):
            vector = self.transposed_times(self.times(vector))
            vector /= np.linalg.norm(vector)
        return float(np.linalg.norm(self.times(vector)))

    def subset(self, members: Sequence[int]) -> Rows:
        picked = Rows.__new__(Rows)
        keep = np.isin(self.rows, members)
        order = {m: r for r, m in enumerate(members)}
        picked.count = len(members)
        rows = np.array([order[int(r)] for r in self.rows[keep]], dtype=np.int64)
        sort = np.argsort(rows, kind="stable")
        picked.rows = rows[sort]
        picked.cols = self.cols[keep][sort]
        picked.values = self.values[keep][sort]
        picked._starts = np.searchsorted(picked.rows, np.arange(picked.count))
        return picked


@dataclass(frozen=True, slots=True)
class Labels:
    kinds: npt.NDArray[np.int64]
    abusive: Floats

    @classmethod
    def of(cls, examples: Sequence[Example]) -> Labels:
        return cls(
            np.array([KINDS.index(e.kind) for e in examples], dtype=np.int64),
            np.array([e.abusive for e in examples], dtype=np.float64),
        )

    def subset(self, members: Sequence[int]) -> Labels:
        return Labels(self.kinds[list(members)], self.abusive[list(members)])


def fit(rows: Rows, labels: Labels, strength: float) -> tuple[Floats, Floats]:
    """Both heads by accelerated gradient descent on the L2-penalised log-loss."""
    n, k = rows.count, len(KINDS)
    onehot = np.eye(k)[labels.kinds]
    weight = np.where(labels.abusive > 0, ABUSE_WEIGHT, 1.0)
    weight /= weight.mean()
    # A step of 1/L, L bounding the loss's curvature: the rows' largest singular
    # value squared over n, times the most a softmax (1/2) or a weighted logistic
    # output (1/4 of the largest weight) bends.
    curvature = max(0.5, 0.25 * float(weight.max())) * rows.spectral_norm() ** 2 / n
    step = 1.0 / (curvature + strength)
    w = np.zeros((features.DIMENSIONS, k + 1))
    b = np.zeros(k + 1)
    look_w, look_b, t = w.copy(), b.copy(), 1.0
    for _ in range(STEPS):
        logits = rows.times(look_w) + look_b
        kinds = softmax(logits[:, :k], 1.0)
        abusive = sigmoid(logits[:, k], 1.0)
        error = np.concatenate([kinds - onehot, (weight * (abusive - labels.abusive))[:, None]], 1)
        error /= n
        new_w = look_w - step * (rows.transposed_times(error) + strength * look_w)
        new_b = look_b - step * error.sum(axis=0)
        t_next = (1 + np.sqrt(1 + 4 * t * t)) / 2
        look_w = new_w + (t - 1) / t_next * (new_w - w)
        look_b = new_b + (t - 1) / t_next * (new_b - b)
        w, b, t = new_w, new_b, t_next
    return w, b


def log_loss(logits: Floats, labels: Labels, kind_t: float = 1.0, abuse_t: float = 1.0) -> float:
    k = len(KINDS)
    kinds = softmax(logits[:, :k], kind_t)[np.arange(len(labels.kinds)), labels.kinds]
    abusive = sigmoid(logits[:, k], abuse_t)
    abuse = np.where(labels.abusive > 0, abusive, 1 - abusive)
    return float(
        -np.mean(np.log(np.clip(kinds, 1e-12, 1))) - np.mean(np.log(np.clip(abuse, 1e-12, 1)))
    )


def cross_validated(rows: Rows, labels: Labels, strength: float) -> Floats:
    """Each training message's logits from a model trained without its fold."""
    out = np.zeros((rows.count, len(KINDS) + 1))
    folds = np.arange(rows.count) % FOLDS
    for fold in range(FOLDS):
        fit_on = [int(i) for i in np.where(folds != fold)[0]]
        held = [int(i) for i in np.where(folds == fold)[0]]
        w, b = fit(rows.subset(fit_on), labels.subset(fit_on), strength)
        out[held] = rows.subset(held).times(w) + b
    return out


def temperatures(logits: Floats, labels: Labels) -> tuple[float, float]:
    """The temperature of each head that minimises its log-loss on `logits`."""
    k = len(KINDS)
    kind_nll = [
        -np.mean(np.log(softmax(logits[:, :k], t)[np.arange(len(labels.kinds)), labels.kinds]))
        for t in TEMPERATURES
    ]
    abuse_nll = []
    for t in TEMPERATURES:
        p = np.clip(sigmoid(logits[:, k], t), 1e-12, 1 - 1e-12)
        abuse_nll.append(-np.mean(np.where(labels.abusive > 0, np.log(p), np.log(1 - p))))
    return float(TEMPERATURES[int(np.argmin(kind_nll))]), float(
        TEMPERATURES[int(np.argmin(abuse_nll))]
    )


def reliability(
    confidence: Floats, correct: npt.NDArray[np.bool_]
) -> list[tuple[str, int, float, float]]:
    """(bin, n, mean confidence, accuracy) for each non-empty bin of confidence."""
    table = []
    edges = np.linspace(0, 1, BINS + 1)
    for low, high in itertools.pairwise(edges):
        inside = (confidence >= low) & ((confidence < high) | (high == 1.0))
        if inside.any():
            table.append(
                (
                    f"{low:.1f}-{high:.1f}",
                    int(inside.sum()),
                    float(confidence[inside].mean()),
                    float(correct[inside].mean()),
                )
            )
    return table


def expected_calibration_error(confidence: Floats, correct: npt.NDArray[np.bool_]) -> float:
    n = len(confidence)
    return sum(
        count / n * abs(mean - acc) for _, count, mean, acc in reliability(confidence, correct)
    )


def report(model: Classifier, examples: Sequence[Example], title: str) -> list[str]:
    """Accuracy, Brier score, calibration and the screened share of `examples`."""
    k = len(KINDS)
    logits = np.stack([model.logits(e.text) for e in examples])
    labels = Labels.of(examples)
    kinds = softmax(logits[:, :k], model.kind_temperature)
    abusive = sigmoid(logits[:, k], model.abuse_temperature)
    predicted = kinds.argmax(axis=1)
    confidence = kinds.max(axis=1)
    right = predicted == labels.kinds
    onehot = np.eye(k)[labels.kinds]
    flagged = abusive >= 0.5
    truth = labels.abusive > 0
    lines = [
        f"{title}: {len(examples)} messages, {int(truth.sum())} abusive",
        f"  kind: accuracy {right.mean():.3f} ({int(right.sum())}/{len(examples)}), "
        f"Brier {np.mean(np.sum((kinds - onehot) ** 2, axis=1)):.3f}, "
        f"ECE {expected_calibration_error(confidence, right):.3f}",
        f"  abusive: accuracy {np.mean(flagged == truth):.3f}, "
        f"precision {_share(flagged & truth, flagged)}, recall {_share(flagged & truth, truth)}, "
        f"Brier {np.mean((abusive - labels.abusive) ** 2):.3f}",
        "  kind reliability (bin, n, mean confidence, accuracy):",
    ]
    lines += [f"    {b}  {n:4d}  {m:.3f}  {a:.3f}" for b, n, m, a in reliability(confidence, right)]
    abuse_right = flagged == truth
    abuse_confidence = np.where(flagged, abusive, 1 - abusive)
    lines.append("  abusive reliability (bin, n, mean confidence, accuracy):")
    lines += [
        f"    {b}  {n:4d}  {m:.3f}  {a:.3f}"
        for b, n, m, a in reliability(abuse_confidence, abuse_right)
    ]
    offensive = np.array([features.offensive(e.text) for e in examples])
    # As moderate acts: sure of one of the DOCUMENT_KINDS when sure it is either (route
    # tells them apart), so mistaking one for the other there is no error.
    screened = np.array(
        [sure_of(row, int(best)) for row, best in zip(kinds, predicted, strict=True)]
    )
    family = [KINDS.index(kind) for kind in DOCUMENT_KINDS]
    right_enough = right | (np.isin(predicted, family) & np.isin(labels.kinds, family))
    lines.append(
        "  screened without the model (kind confidence >= level, abusive <= clear, "
        f"no insult or threat; {' and '.join(DOCUMENT_KINDS)} counted as one):"
    )
    for level in LEVELS:
        sure = (screened >= level) & (abusive <= policy.ABUSE_CLEAR) & ~offensive
        lines.append(
            f"    {level:.2f}: {int(sure.sum())}/{len(examples)} ({sure.mean():.0%}), "
            f"wrong kind {int((sure & ~right_enough).sum())}, "
            f"abusive cleared {int((sure & truth).sum())}"
        )
        if level == DEFAULT_CONFIDENCE:
            lines += [
                f"      wrong: {examples[i].text!r} {examples[i].kind} -> {KINDS[predicted[i]]}"
                for i in np.where(sure & ~right_enough)[0]
            ]
    cleared = (abusive <= policy.ABUSE_CLEAR) & ~offensive
    lines.append(
        f"  abusive <= {policy.ABUSE_CLEAR}: {int(cleared.sum())} cleared, of them abusive "
        f"{int((cleared & truth).sum())}; flagged (>= {policy.ABUSE_FLAG}) "
        f"{int((abusive >= policy.ABUSE_FLAG).sum())}"
    )
    return lines


def _share(hits: npt.NDArray[np.bool_], of: npt.NDArray[np.bool_]) -> str:
    return f"{hits.sum() / of.sum():.3f}" if of.sum() else "n/a"


def train(examples: Sequence[Example]) -> tuple[Classifier, list[str]]:
    """The model trained on the training part, and what its training printed."""
    train_ids, _ = split(examples)
    training = [examples[i] for i in train_ids]
    rows = Rows([e.text for e in training])
    labels = Labels.of(training)
    lines = [f"training on {len(training)} of {len(examples)} examples"]
    held_out = {strength: cross_validated(rows, labels, strength) for strength in LAMBDAS}
    losses = {strength: log_loss(logits, labels) for strength, logits in held_out.items()}
    for strength, loss in losses.items():
        lines.append(f"  L2 {strength:g}: cross-validated log-loss {loss:.4f}")
    strength = min(LAMBDAS, key=lambda s: losses[s])
    kind_t, abuse_t = temperatures(held_out[strength], labels)
    lines.append(
        f"  chosen L2 {strength:g}; temperatures: kind {kind_t:.3f}, abusive {abuse_t:.3f}"
    )
    abusive = sigmoid(held_out[strength][:, len(KINDS)], abuse_t)
    lowest = float(abusive[labels.abusive > 0].min())
    offensive = np.array([features.offensive(e.text) for e in training])
    cleared = (abusive <= policy.ABUSE_CLEAR) & ~offensive
    truth = labels.abusive > 0
    lines.append(
        f"  cross-validated: the least likely abusive example scores {lowest:.3f}; cleared "
        f"(abusive <= {policy.ABUSE_CLEAR}, no insult or threat): "
        f"{int((cleared & truth).sum())} of {int(truth.sum())} abusive, "
        f"{int((cleared & ~truth).sum())} of {int((~truth).sum())} clean"
    )
    for i in np.where(cleared & truth)[0]:
        lines.append(f"    cleared though abusive: {training[i].text!r}")
    w, b = fit(rows, labels, strength)
    model = Classifier(w.astype(np.float32), b, kind_temperature=kind_t, abuse_temperature=abuse_t)
    return model, lines


def model_bytes(model: Classifier, digest: str) -> bytes:
    """The model file: an .npz whose members carry fixed timestamps, so the same
    model always gives the same bytes."""
    arrays: dict[str, npt.NDArray[Any]] = {
        "weights": model.weights.astype(np.float32),
        "bias": model.bias.astype(np.float64),
        "temperatures": np.array([model.kind_temperature, model.abuse_temperature]),
        "kinds": np.array(KINDS),
        "feature_version": np.array(features.VERSION),
        "examples_sha256": np.array(digest),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, array, allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the model file differs")
    parser.add_argument("--examples", type=Path, default=EXAMPLES)
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    args = parser.parse_args(argv)
    examples = load_examples(args.examples)
    model, lines = train(examples)
    _, held_ids = split(examples)
    lines += report(model, [examples[i] for i in held_ids], "held-back")
    print("\n".join(lines))
    data = model_bytes(model, examples_digest(args.examples))
    if args.check:
        same = args.out.exists() and args.out.read_bytes() == data
        print(f"{args.out}: {'the same bytes' if same else 'DIFFERS from a rebuild'}")
        return 0 if same else 1
    args.out.write_bytes(data)
    print(f"wrote {args.out} ({len(data):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
