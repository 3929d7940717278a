"""Every prompt the graph sends, in one place.

Prompts for the local 1.5B model are short on purpose: prompt evaluation on two
cores costs more than decoding. The passages come first in the grade and
generate prompts and are byte-identical in both, so llama.cpp reuses the
evaluated prefix and the generate call only pays for its instruction.
"""

from __future__ import annotations

from collections.abc import Sequence

from candor.types import Hit, Message

TRIAGE_SYSTEM = (
    "You screen one chat message sent to the documentation assistant of a website. "
    "Judge only the message itself.\n"
    "abusive: true only if the message insults, threatens or harasses the assistant or "
    "anyone else (name-calling, contempt, slurs). Criticism, frustration or swearing about "
    "a problem without an insult is not abusive.\n"
    "kind:\n"
    "- greeting: hello, thanks, goodbye or small talk with no question about a topic\n"
    "- contact: asks how to reach a person, the owner, support or a human\n"
    "- code_request: asks to write, fix or debug their code, script or stack trace\n"
    "- follow_up: only asks to continue or expand the previous answer "
    '("tell me more", "why?", "an example?") without naming a topic\n'
    "- question: any other request for information"
)

MODERATION_SYSTEM = (
    "You check one chat message for insults. insulting is true only if the message calls "
    "someone names (stupid, idiot, useless, worthless, clueless, moron), shows contempt for "
    "a person or the assistant, or threatens someone. Pasted code, error messages, commands, "
    "questions and frustration with software are not insulting."
)


def moderation(message: str) -> list[Message]:
    return [
        {"role": "system", "content": MODERATION_SYSTEM},
        {"role": "user", "content": f"Message:\n<<<\n{message}\n>>>"},
    ]


def triage(message: str) -> list[Message]:
    return [
        {"role": "system", "content": TRIAGE_SYSTEM},
        {"role": "user", "content": f"Message:\n<<<\n{message}\n>>>"},
    ]


def passage_label(hit: Hit) -> str:
    """A passage's label line: its document title and section path."""
    chunk = hit.chunk
    return " - ".join(part for part in (chunk.title, chunk.heading) if part)


def shown_text(text: str, max_chars: int) -> str:
    """A passage's text as the model sees it: cut at max_chars, at a word's end.

    A word cut in half ("bisect ru") is what a small model then copies into its
    answer; the whole word is worth the few characters less.
    """
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    return (cut[:space] if space >= max_chars // 2 else cut).rstrip() + " ..."


def passage_text(hit: Hit, max_chars: int) -> str:
    """One passage as the model sees it: its label line, then its text cut at max_chars."""
    return f"{passage_label(hit)}\n{shown_text(hit.chunk.text, max_chars)}"


def format_passages(passages: Sequence[Hit], max_chars: int) -> str:
    return "\n\n".join(
        f"[{number}] {passage_text(hit, max_chars)}" for number, hit in enumerate(passages, 1)
    )


PASSAGES_SYSTEM = "You answer questions using only the numbered passages you are given."


def _with_passages(passages_text: str, question: str, instruction: str) -> list[Message]:
    # The shared prefix (system, passages, question) must stay identical between
    # grade and generate; only the instruction after it differs.
    return [
        {"role": "system", "content": PASSAGES_SYSTEM},
        {
            "role": "user",
            "content": f"Passages:\n{passages_text}\n\nQuestion: {question}\n\n{instruction}",
        },
    ]


GRADE_INSTRUCTION = (
    "Task: be a strict grader. Decide whether the passages above contain the facts needed "
    "to answer the question. The answer must be stated in the passages, not guessed, "
    "inferred from general knowledge, or about a different command, option or product. "
    "If the question names something (a command, option, setting, version, service) that "
    "the passages never mention, answerable is false."
)


def grade(passages_text: str, question: str) -> list[Message]:
    return _with_passages(passages_text, question, GRADE_INSTRUCTION)


ANSWER_INSTRUCTION = (
    "Task: answer the question in 2 to 4 sentences using only the passages. After each "
    "sentence, cite the passage numbers it comes from in square brackets, like [1] or [2][3]. "
    "Keep exact names of commands, options and values as written in the passages."
)


def answer(passages_text: str, question: str) -> list[Message]:
    return _with_passages(passages_text, question, ANSWER_INSTRUCTION)


def converse(message: str, site_name: str) -> list[Message]:
    return [
        {
            "role": "system",
            "content": (
                f"You are the friendly documentation assistant of {site_name}. Reply to the "
                "message in one or two short sentences and offer to answer questions about "
                "the documentation. Do not state any facts."
            ),
        },
        {"role": "user", "content": message},
    ]


REWRITE_SYSTEM = (
    "You rewrite a user's question into a search query for technical documentation. "
    "Use the words the documentation itself would use: command names, option names, "
    "configuration keys and technical terms. Give only the query, at most 15 words."
)


def rewrite(question: str, tried: Sequence[str]) -> list[Message]:
    tried_text = "\n".join(f"- {query}" for query in tried)
    return [
        {"role": "system", "content": REWRITE_SYSTEM},
        {
            "role": "user",
            "content": (
                f"Question: {question}\nQueries that found nothing useful:\n{tried_text}\n"
                "New query:"
            ),
        },
    ]


def decline(site_name: str, contact: str) -> str:
    return (
        f"I could not find this in the documents of {site_name}, so I won't guess. "
        f"For anything the documents do not cover, please contact {contact}."
    )


def code_refusal(site_name: str, contact: str) -> str:
    return (
        f"I can only answer questions about the documents of {site_name}; I can't write or "
        f"debug code. For help with your code, please contact {contact}."
    )


def contact_reply(contact: str) -> str:
    return f"You can reach us at {contact}."


def warning() -> str:
    return (
        "Let's keep this respectful. I'm happy to help with questions about the documents, "
        "but another abusive message will end this conversation."
    )


def ended() -> str:
    return "This conversation has ended because of repeated abusive messages."
