"""An unexpected error as the log may hold it: its type, frames and causes, not its text.

A bug's message is whatever the failing code put in it: a KeyError's key, a
pydantic error's input value, a decode error's bytes. That can be the visitor's
question or an answer, which no log line may hold (CANDOR_STORE_QUESTIONS=false
promises it). What finds the bug is the type and the line that raised it, so the
log gets a stand-in that keeps those and says that the message was withheld:

    logger.error("...", exc_info=withheld(error), extra={"error_type": type_name(error)})

Notes (`add_note`) are dropped for the same reason.
"""

from __future__ import annotations


class Withheld(Exception):
    """Stands in for an error in the log: the original's frames, its type named in the text."""


class WithheldGroup(ExceptionGroup[Exception]):
    """Stands in for an exception group (a task group's failure): each member withheld too."""


def type_name(error: BaseException) -> str:
    """`KeyError`, `json.decoder.JSONDecodeError`: the type as a traceback names it."""
    kind = type(error)
    if kind.__module__ in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def withheld(error: BaseException) -> BaseException:
    """A stand-in for `error` with the same traceback, cause and context, and no message."""
    return _stand_in(error, {})


def _stand_in(error: BaseException, made: dict[int, BaseException]) -> BaseException:
    # `made`: a cause chain can loop back on itself (an error re-raised inside its
    # own handler); each error gets one stand-in.
    if id(error) in made:
        return made[id(error)]
    text = f"{type_name(error)} (message withheld: it may hold visitor text)"
    stand_in: BaseException
    if isinstance(error, BaseExceptionGroup):
        members = [_member(e, made) for e in error.exceptions]
        stand_in = WithheldGroup(text, members)
    else:
        stand_in = Withheld(text)
    made[id(error)] = stand_in
    stand_in.__traceback__ = error.__traceback__
    if error.__cause__ is not None:
        stand_in.__cause__ = _stand_in(error.__cause__, made)
    if error.__context__ is not None:
        stand_in.__context__ = _stand_in(error.__context__, made)
    stand_in.__suppress_context__ = error.__suppress_context__
    return stand_in


def _member(error: BaseException, made: dict[int, BaseException]) -> Exception:
    stand_in = _stand_in(error, made)
    # A group of Exceptions holds only Exceptions; every stand-in is one.
    assert isinstance(stand_in, Exception)
    return stand_in
