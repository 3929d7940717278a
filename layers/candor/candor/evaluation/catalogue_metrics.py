"""Figures of the questions about the documents themselves (kinds catalogue and list).

Each such question names the entries a complete answer holds (a page count, the
options of a command, the sections of a page). Per answer: the share of them it
holds (its completeness), and the names it shows as code that no document holds
(entries it invented). Per run: whether each question reached the catalogue (its
routing), was answered there, how complete the answers are, their citations and
seconds; kept apart from the other kinds' figures, so those stay comparable with
runs before the catalogue.
"""

from __future__ import annotations

import html
import re
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from candor.evaluation.retrieval_metrics import percentile

if TYPE_CHECKING:
    from candor.evaluation.agent_metrics import AgentRecord

_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_SCRIPT = re.compile(r"(?is)<(script|style)\b.*?</\1\s*>|<!--.*?-->")
_TAG = re.compile(r"(?s)<[^>]*>")
_SPACE = re.compile(r"\s+")


def squeezed(text: str) -> str:
    """`text` case-folded without any whitespace: "abs( X )" and "abs(X)" read alike."""
    return _SPACE.sub("", text.casefold())


def corpus_text(documents: Sequence[tuple[str, bytes]]) -> str:
    """Every document's text (HTML without its tags), squeezed, as one string."""
    parts = []
    for source, data in documents:
        text = data.decode("utf-8", errors="replace")
        if source.lower().endswith((".html", ".htm")):
            text = html.unescape(_TAG.sub("", _SCRIPT.sub(" ", text)))
        parts.append(squeezed(text))
    return "\n".join(parts)


def entries_present(answer: str, entries: Sequence[str]) -> tuple[str, ...]:
    held = squeezed(answer)
    return tuple(entry for entry in entries if squeezed(entry) in held)


def invented(answer: str, corpus: str) -> tuple[str, ...]:
    """The names an answer shows as code (`...`) that no document holds.

    A definition list's terms that share one description are one entry, joined by
    ", " (`-n, --dry-run`, from "-n" and "--dry-run" on lines of their own): such a
    span is held when each of its names is.
    """
    spans = dict.fromkeys(span.strip() for span in _CODE_SPAN.findall(answer))
    return tuple(span for span in spans if span and not _held(span, corpus))


def _held(span: str, corpus: str) -> bool:
    if squeezed(span) in corpus:
        return True
    names = [name for name in span.split(", ") if name.strip()]
    return len(names) > 1 and all(squeezed(name) in corpus for name in names)


def _rate(hits: int, n: int) -> float | None:
    return round(hits / n, 4) if n else None


def _mean(values: Sequence[float], digits: int = 4) -> float | None:
    return round(statistics.fmean(values), digits) if values else None


def summarise(records: Sequence[AgentRecord]) -> dict[str, Any]:
    """The catalogue figures of a run's catalogue and list questions."""
    done = [r for r in records if not r.failed]
    answered = [r for r in done if r.decision == "answered"]
    lists = [r for r in done if r.kind == "list"]
    citations = sum(len(r.cited_sources) for r in answered)
    seconds = [r.seconds for r in done]
    counts: dict[str, tuple[int, int]] = {
        "routed_to_catalogue": (sum(r.reached_catalogue for r in done), len(done)),
        "answered_from_catalogue": (sum(r.catalogue_answered for r in done), len(done)),
        "answered": (len(answered), len(done)),
        "complete": (sum(r.completeness() == 1.0 for r in done), len(done)),
        "citation_validity": (sum(r.citations_valid for r in answered), citations),
        "citing_an_expected_page": (
            sum(1 for r in answered if set(r.cited_sources) & set(r.expected_sources)),
            sum(1 for r in answered if r.expected_sources),
        ),
        "answers_with_an_invented_entry": (sum(1 for r in answered if r.invented), len(answered)),
    }
    summary: dict[str, Any] = {"n": len(records), "failures": len(records) - len(done)}
    for name, (hits, n) in counts.items():
        summary[name] = _rate(hits, n)
    summary |= {
        "completeness": _mean([r.completeness() for r in done]),
        "list_completeness": _mean([r.completeness() for r in lists]),
        "model_calls_per_question": _mean([float(r.model_calls) for r in done], 3),
        "seconds_mean": _mean(seconds, 3),
        "seconds_p50": None if not seconds else round(percentile(seconds, 50) or 0.0, 3),
        "seconds_p90": None if not seconds else round(percentile(seconds, 90) or 0.0, 3),
        "samples": {name: n for name, (_, n) in counts.items()}
        | {"completeness": len(done), "list_completeness": len(lists), "seconds": len(done)},
    }
    return summary
