"""What a question about the documents asks the catalogue for, read by rules.

The catalogue is asked only through a few functions with parameters
(candor.catalogue.functions): what the documents cover, how many pages there are,
what changed last, which pages are about a topic, the outline of a page, the
entries under a page or section. A question is mapped onto one of them by the
patterns below, never turned into a query a model writes. A question no pattern
reads is not a catalogue question (None): it goes on to retrieval.

The patterns were written for English questions of the kinds in
data/screening/examples.jsonl (none from the evaluation sets) and checked on the
dev set's catalogue questions (data/eval/git-doc-catalogue.jsonl).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Function = Literal["overview", "count", "recent", "pages", "outline", "entries"]


@dataclass(frozen=True, slots=True)
class Ask:
    """One call of a catalogue function: which, about what (`subject`, the words that
    name a page, section or topic), listing what (`noun`, as the question says it:
    "options"), and whether the visitor asked what the assistant can do."""

    function: Function
    subject: str = ""
    noun: str = ""
    greeting: bool = False


# What the documents are called in questions about them.
_DOCS = (
    r"(?:docs|documentation|documents|document|pages|page|manuals?|man pages|guides?|"
    r"articles|site|website|knowledge base|help pages|reference)"
)
_ABOUT_DOCS = re.compile(rf"\b{_DOCS}\b")

_CAPABILITY = re.compile(
    r"\bwhat (?:else |all |exactly )?(?:can|could|do|would) (?:you|u) (?:help(?: me| us)?(?: with)?"
    r"|do(?: for me)?|answer|tell me about|know(?: about)?|cover|explain)\b"
    r"|\bhow (?:can|could) you help\b"
    r"|\bwhat (?:are you|is this (?:bot|assistant|chat|chatbot|thing))"
    r"(?: for| able to do| good for| here for)\b"
    r"|\bwhat (?:kind of |sort of |type of )?(?:questions|things|topics|stuff) "
    r"(?:can|could|do|should) (?:i|you|we)\b"
    r"|\bwhat (?:are you|is your) (?:able|here) (?:to|for)\b"
)
_RECENT = re.compile(
    r"\b(?:recent(?:ly)?|latest|newest|lately|last (?:changed|updated|modified|edited|added)"
    r"|(?:changed|updated|modified|edited|added) (?:last|most recently)"
    r"|what(?:'s| is| has| have)? (?:changed|new|been (?:updated|added|changed|edited)))\b"
)
_COUNT_PAGES = re.compile(
    rf"\bhow many (?:different |separate )?{_DOCS}\b"
    r"(?! (?:about|on|that|which|cover|mention|describe|talk|explain|document))"
)
_PAGES_ABOUT = re.compile(
    rf"^(?:(?:which|what) {_DOCS}|(?:list|show|name|find)(?: me)?(?: all| every)?(?: the)? {_DOCS}"
    rf"|(?:are there|is there|do you have)(?: any)? {_DOCS}"
    rf"|how many {_DOCS})"
    r" (?:(?:are|is) )?(?:there )?(?:that |which )?(?:talk|talks|are|is|cover|covers|describe"
    r"|describes|document|documents|explain|explains|mention|mentions|deal|deals|discuss"
    r"|discusses|about|on|for|relate|relates|concern|concerns)"
    r"(?: (?:about|on|with|to))? (?P<subject>.+)$"
)
_WHERE_DOCUMENTED = re.compile(
    r"^(?:where|on which page|which page|what page) (?:is|are|can i find|do i find|would i find)"
    r" (?P<subject>.+?) (?:documented|described|explained|covered|listed)$"
)
_OUTLINE = re.compile(
    r"^(?:what (?:does|do) (?:the )?(?P<a>.+?) (?:page|manual|man page|manual page|document|doc|"
    r"guide|chapter|article|reference)s? (?:cover|contain|include|talk about|explain|describe"
    r"|go over|have)"
    r"|what(?:'s| is) (?:on|in) (?:the )?(?P<b>.+?) (?:page|manual|man page|manual page|document|"
    r"doc|guide|chapter|article)"
    r"|what (?:sections|parts|headings|chapters|topics) (?:does|do|are (?:in|on)|are there in|"
    r"is) (?:the )?(?P<c>.+?)(?: (?:have|contain|cover|include|split into|made of))?"
    r"|(?:give me |show me |what are |what's |what is |list )?(?:an |the )?(?:outline|"
    r"table of contents|contents|structure|"
    r"sections|headings) (?:of|for|in) (?:the )?(?P<d>.+))$"
)
_OVERVIEW = re.compile(
    r"\bwhat (?:topics|subjects|areas|things|kinds of things|sort of things) "
    r"(?:do|does|are|is|can)\b"
    rf"|\bwhat (?:do|does) (?:the |your |these |this |this site's |the site's )?{_DOCS} "
    r"(?:cover|contain|include|describe|explain|talk about|document|say|hold|have)\b"
    rf"|\bwhat(?:'s| is) (?:in|covered (?:in|by)|inside) (?:the |your |these )?{_DOCS}\b"
    rf"|\bwhat are (?:the |your |these )?{_DOCS} (?:about|for)\b"
    rf"|\b(?:an |a |the )?(?:overview|summary|table of contents|index|list) of (?:the |your |all )?"
    rf"(?:{_DOCS}|topics)\b"
    rf"|^(?:list|show|name)(?: me)?(?: all| every)?(?: the| your)? (?:{_DOCS}|topics)$"
    rf"|\bwhat (?:{_DOCS}|topics) (?:are there|do you have|exist|are available|can i read)\b"
    rf"|\bwhat (?:is|are) (?:this|the|your) (?:site|docs|documentation) about\b"
)
# "list (all) the X of Y", "show me every X", "what are the X of Y": X, then Y.
_LIST_VERB = re.compile(
    r"^(?:(?:can|could|would) you |please |i want |i need )?(?:list|enumerate|name|show(?: me)?"
    r"|give(?: me)?|tell me|print|see)(?: me)?"
    r"(?: a list of| a full list of| the list of| the full list of| a complete list of)?"
    r"(?P<quantity> all(?: of)?| every| each| the whole set of)?(?: the| your)? (?P<rest>.+)$"
)
_WHAT_ARE = re.compile(
    r"^what (?:are|were) (?P<quantity>all )?(?:of )?the (?:different |available |possible |valid )?"
    r"(?P<rest>.+)$"
)
# "which X does Y accept", "what X are there", "how many X does Y have": X, a verb, Y.
_WHICH = re.compile(
    r"^(?:which|what|how many) (?:are (?:all )?(?:the )?)?(?P<phrase>[\w.-]+(?: [\w.-]+){0,3}?)"
    r" (?P<verb>does|do|did|can|could|are|is|has|have|exist|exists)\b(?P<rest>.*)$"
)
_ALL = re.compile(r"^(?P<pre>.*?)\b(?P<quantity>every|all(?: the)?|each of the) (?P<rest>.+)$")
# Words around the subject that name no page, section or entry.
_FILLER_TEXT = """
    a an the of in on for from about to with by at into that which who what whose there here
    does do did is are was were be been can could would should will has have had having
    available exist exists existing possible different supported support supports accept
    accepts accepted take takes offer offers provide provides use uses used understand
    understands know knows recognize recognizes list listed include includes included
    documented described defined mentioned named you your me my i we our us please all every
    each whole full complete entire set any some its it this these those they them get
    candor's site docs documentation page pages manual read reads set sets see call calls
    called go goes come comes
"""
_FILLER = frozenset(_FILLER_TEXT.split())
_WORD = re.compile(r"[^\W_][\w.<>*/$+:-]*[^\W_]|[^\W_]")


# What a page or section lists, as a question names it (singular). A question the
# screen took for a content question goes to the catalogue only when it asks for
# one of these ("which options does X accept"), not for "the differences between
# A and B" or "the steps to do X", which passages answer.
_LISTABLE_TEXT = """
    option setting variable command subcommand function hook flag code parameter key
    strategy endpoint term table field column argument event plugin operator mode pragma
    extension module tool utility header method property attribute keyword limit entry
    page section chapter topic error role permission type macro directive switch
    configuration document guide tutorial
"""
LISTABLE = frozenset(_LISTABLE_TEXT.split())


def routable(ask: Ask) -> bool:
    """Whether `ask` is plainly a question for the catalogue, whatever the screen said:
    any function but a listing, or a listing of something pages list."""
    if ask.function != "entries":
        return True
    noun = ask.noun.casefold()
    singular = noun[:-3] + "y" if noun.endswith("ies") else noun.removesuffix("s")
    return singular in LISTABLE or noun in LISTABLE


def normalised(question: str) -> str:
    text = question.casefold().replace("\u2019", "'").replace("`", "").replace('"', "")
    text = " ".join(text.split())
    return text.rstrip(" ?!.")


def parse(question: str) -> Ask | None:
    """The catalogue function a question asks for, or None when it asks for none."""
    text = normalised(question)
    if not text:
        return None
    if _CAPABILITY.search(text):
        return Ask("overview", greeting=True)
    if _RECENT.search(text) and _ABOUT_DOCS.search(text):
        return Ask("recent")
    if (match := _PAGES_ABOUT.match(text)) and subject_words(match.group("subject")):
        return Ask("pages", subject=subject_words(match.group("subject")))
    if match := _WHERE_DOCUMENTED.match(text):
        return Ask("pages", subject=subject_words(match.group("subject")))
    if _COUNT_PAGES.search(text):
        return Ask("count")
    if _OVERVIEW.search(text):
        return Ask("overview")
    if match := _OUTLINE.match(text):
        named = subject_words(next(g for g in match.groups() if g))
        return Ask("outline", subject=named) if named else Ask("overview")
    return _entries(text)


def _entries(text: str) -> Ask | None:
    for pattern in (_LIST_VERB, _WHAT_ARE):
        if match := pattern.match(text):
            found = _noun_phrase(match.group("rest"), every=bool(match.group("quantity")))
            if found:
                return _listing(*found)
    if match := _WHICH.match(text):
        words = match.group("phrase").split()
        if _plural(words[-1]):
            subject = " ".join((*words[:-1], match.group("rest")))
            return Ask("entries", subject=subject_words(subject), noun=words[-1])
    if match := _ALL.match(text):
        found = _noun_phrase(match.group("rest"), every=True)
        if found:
            noun, subject = found
            return _listing(noun, f"{match.group('pre')} {subject}")
    return None


def _listing(noun: str, subject: str) -> Ask:
    return Ask("entries", subject=subject_words(subject), noun=noun)


def _noun_phrase(text: str, *, every: bool) -> tuple[str, str] | None:
    """What `text` lists and the rest: "configuration variables of git" gives
    ("variables", "configuration of git"). The noun is the first plural among its
    first four words, before any "of" or "in"; after "every" or "each", the first
    word will do ("every term in the glossary")."""
    words = text.split()

    def without(index: int) -> tuple[str, str]:
        return words[index], " ".join(words[:index] + words[index + 1 :])

    for index, word in enumerate(words[:4]):
        if word in _OF_WORDS:
            break
        if word not in _FILLER and _plural(word):
            return without(index)
    if every:
        for index, word in enumerate(words[:3]):
            if word not in _FILLER and word.isalpha():
                return without(index)
    return None


_OF_WORDS = frozenset({"of", "in", "for", "on", "from", "that", "which", "under"})


def _plural(word: str) -> bool:
    return len(word) > 3 and word.endswith("s") and not word.endswith("ss") and word.isalpha()


def subject_words(text: str) -> str:
    """The words of `text` that can name a page, section or topic, in order."""
    kept = [word for word in _WORD.findall(text) if word not in _FILLER]
    return " ".join(kept)
