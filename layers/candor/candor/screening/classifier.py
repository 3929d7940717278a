"""The screening classifier: two linear heads over the hashed features of a message.

One head gives a probability to each kind of message (softmax), the other the
probability that it is abusive (logistic). Each head's logits are divided by a
temperature fitted on held-out predictions, so that a probability of 0.9 is right
about nine times in ten. The weights are trained by scripts/train_screening.py from
data/screening/examples.jsonl and committed as model.npz; loading checks that they
were trained on the features this code computes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import get_args

import numpy as np
import numpy.typing as npt

from candor.graph.state import Intent
from candor.screening import features

MODEL_PATH = Path(__file__).with_name("model.npz")
KINDS: tuple[Intent, ...] = get_args(Intent)

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Screen:
    """What the classifier says of one message."""

    kind: Intent
    confidence: float  # the probability of `kind`
    abusive: float  # the probability that the message is abusive
    # Whether it holds a word of the insult list or a threat (features.offensive).
    offensive: bool = False


def softmax(logits: Floats, temperature: float) -> Floats:
    scaled = logits / temperature
    scaled = scaled - scaled.max(axis=-1, keepdims=True)
    exp = np.exp(scaled)
    result: Floats = exp / exp.sum(axis=-1, keepdims=True)
    return result


def sigmoid(logits: Floats, temperature: float) -> Floats:
    result: Floats = 1.0 / (1.0 + np.exp(-logits / temperature))
    return result


class Classifier:
    """The trained heads: `weights` has one column per kind, then the abuse column."""

    def __init__(
        self,
        weights: npt.NDArray[np.float32],
        bias: Floats,
        *,
        kind_temperature: float,
        abuse_temperature: float,
    ) -> None:
        if weights.shape != (features.DIMENSIONS, len(KINDS) + 1):
            raise ValueError(f"weights of shape {weights.shape} do not fit the features")
        self.weights = weights
        self.bias = bias
        self.kind_temperature = kind_temperature
        self.abuse_temperature = abuse_temperature

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> Classifier:
        with np.load(path) as data:
            kinds = tuple(str(k) for k in data["kinds"])
            version = int(data["feature_version"])
            if kinds != KINDS or version != features.VERSION:
                raise ValueError(
                    f"{path} was trained for kinds {kinds} and features v{version}; this "
                    f"code has {KINDS} and v{features.VERSION}: run scripts/train_screening.py"
                )
            kind_t, abuse_t = (float(t) for t in data["temperatures"])
            return cls(
                data["weights"].astype(np.float32),
                data["bias"].astype(np.float64),
                kind_temperature=kind_t,
                abuse_temperature=abuse_t,
            )

    def logits(self, message: str) -> Floats:
        index, values = features.vector(message)
        result: Floats = values.astype(np.float64) @ self.weights[index] + self.bias
        return result

    def screen(self, message: str) -> Screen:
        logits = self.logits(message)
        kinds = softmax(logits[: len(KINDS)], self.kind_temperature)
        best = int(kinds.argmax())
        abusive = float(sigmoid(logits[len(KINDS)], self.abuse_temperature))
        return Screen(KINDS[best], sure_of(kinds, best), abusive, features.offensive(message))


# The kinds that both go to the documents: route tells them apart by rules (a
# question the catalogue can answer, candor.catalogue.asks, goes to it whichever of
# the two the screen says), so the screen need only be sure that it is one of them.
DOCUMENT_KINDS: tuple[Intent, ...] = ("question", "catalogue")


def sure_of(kinds: Floats, best: int) -> float:
    """How sure the screen is of its kind: the probability of the kind, or for one of
    the DOCUMENT_KINDS, of either of them."""
    if KINDS[best] not in DOCUMENT_KINDS:
        return float(kinds[best])
    return float(sum(kinds[KINDS.index(kind)] for kind in DOCUMENT_KINDS))


@lru_cache(maxsize=1)
def shipped() -> Classifier:
    """The committed model, loaded once per process (a few hundred kilobytes)."""
    return Classifier.load()
