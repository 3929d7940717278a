"""The embedded ChatModel: a GGUF model run in-process by llama.cpp (llama-cpp-python).

Prompts are ChatML, built here token by token rather than from the GGUF's embedded
template: the control tokens come from trusted text only, and message contents
(questions, retrieved passages) are tokenized with special tokens disabled, so a
passage containing "<|im_end|>" cannot close its turn and speak as the system.

Speed on a 2-core machine (about 40 prompt tokens/s, 11 generated tokens/s) comes
from evaluating as few prompt tokens as possible:
- llama-cpp-python keeps the KV cache of the previous call and re-evaluates only
  the prompt tokens after the longest shared prefix (`Llama.generate`). Calls that
  share a long head (system prompt + passages) and differ only at the end pay for
  the head once.
- The KV state of each system turn is saved the first time it is evaluated, so a
  call whose system prompt was seen before, but not in the previous call, starts
  from it instead of re-evaluating it: a triage prompt after an answer costs only
  its user turn. The graph has five fixed system prompts (triage, moderation,
  rewrite, converse, and the one grade and generate share), the eval's plain_rag
  reference a sixth; SAVED_SYSTEM_PROMPTS keeps them all, so each is evaluated
  once per process. A saved state costs about 29 KB per token (Qwen2.5-1.5B's KV
  cache in f16) plus one row of logits (0.6 MB): the graph's five take 19 MB.
  Restoring one took 35-60 ms (on busy cores), where evaluating the 195-token
  triage prompt takes 3-5 s at 43-62 prompt tokens/s.
- Every call reports the prompt tokens it evaluated (`Usage.tokens_evaluated`),
  counted where llama-cpp-python decodes (see _PromptCount).
- Structured calls decode under a grammar compiled from the pydantic schema, so the
  output always parses and no tokens are spent on prose.

llama.cpp is not thread-safe: each loaded model has one lock, and calls run in a
worker thread so the event loop stays free.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ValidationError

from candor.backends.threaded import iterate_in_thread
from candor.errors import ConfigurationError, ModelError
from candor.ports import Judged, M, Structured, Text, TextPiece, read_text
from candor.settings import Price
from candor.types import Message, Usage
from candor.withheld import withheld

if TYPE_CHECKING:
    from llama_cpp import Llama, LlamaState
    from llama_cpp.llama_grammar import LlamaGrammar

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
# Greedy decoding everywhere: answers should be reproducible, and at temperature 0
# the repeat penalty is what keeps a small model from looping in free text.
TEXT_REPEAT_PENALTY = 1.1
_SEED = 1234
# System turns shorter than this are cheaper to evaluate than to save and restore.
_MIN_HEAD_TOKENS = 32
# How many system turns' states a loaded model keeps (the most recently used): at
# least the distinct system prompts a process sends (six, see the module docstring).
SAVED_SYSTEM_PROMPTS = 8


@dataclass(frozen=True, slots=True)
class CallTimings:
    """What one call ran, for benchmarks and diagnostics."""

    prompt_tokens: int  # the whole prompt
    prompt_evaluated: int  # prompt tokens actually run (the rest came from the KV cache)
    head_restored: bool  # the system turn came from a saved state
    prompt_seconds: float  # llama.cpp's time for prompt batches
    generated_tokens: int  # llama.cpp's count of one-token decodes, for the decode speed
    decode_seconds: float
    total_seconds: float


@dataclass(slots=True)
class _PromptCount:
    """The prompt tokens decoded during the current call (the model's lock held).

    Counted where llama-cpp-python decodes (`Llama.eval`: the head a call saves,
    the prompt's tail after the cached prefix, then each generated token), because
    llama.cpp's own counters are not exact here: `llama_perf_context` reports at
    least 1 for each, and a one-token decode counts as generated even when it is the
    prompt's last token, re-run to refresh the logits after a restore.
    """

    end: int = 0  # positions below this belong to the call's prompt
    evaluated: int = 0

    def begin(self, prompt_tokens: int) -> None:
        self.end, self.evaluated = prompt_tokens, 0

    def decoded(self, start: int, tokens: int) -> None:
        self.evaluated += max(0, min(start + tokens, self.end) - start)


@dataclass(frozen=True, slots=True)
class _Call:
    """One call in progress: its prompt, whether a saved head was restored, its start."""

    prompt: list[int]
    restored: bool
    started: float


@dataclass(frozen=True, slots=True)
class _Completion:
    text: str
    finish_reason: str
    tokens_in: int
    tokens_out: int
    tokens_evaluated: int


class _Loaded:
    """One model in memory, with the lock that serialises every use of it."""

    def __init__(self, llama: Llama, count: _PromptCount) -> None:
        self.llama = llama
        self.count = count
        self.lock = threading.Lock()
        self.im_start = self.special(IM_START)
        self.im_end = self.special(IM_END)
        self.newline = self.plain("\n")
        self.heads: OrderedDict[tuple[int, ...], LlamaState] = OrderedDict()

    def special(self, text: str) -> list[int]:
        tokens: list[int] = self.llama.tokenize(text.encode(), add_bos=False, special=True)
        return tokens

    def plain(self, text: str) -> list[int]:
        data = text.encode("utf-8", errors="replace")
        tokens: list[int] = self.llama.tokenize(data, add_bos=False, special=False)
        return tokens

    def starts_of(self, word: str) -> list[int]:
        """The distinct first tokens of the ways `word` can open a reply."""
        variants = {word, word.lower(), word.capitalize(), word.upper()}
        firsts = {
            self.plain(text)[0] for v in variants for text in (v, f" {v}") if self.plain(text)
        }
        return sorted(firsts)

    def cached_prefix(self, prompt: Sequence[int]) -> int:
        """How many leading tokens of `prompt` the KV cache already holds."""
        held = self.llama.input_ids[: self.llama.n_tokens]
        shared = 0
        for a, b in zip(held, prompt, strict=False):
            if a != b:
                break
            shared += 1
        return shared

    def start_from_head(self, prompt: list[int], head: int, *, keep: int) -> bool:
        """Make the KV cache hold at least `prompt[:head]`; True if a saved state was used.

        Call with the lock held. `Llama.generate` then evaluates only what follows.
        Keeps the states of the `keep` most recently used heads.
        """
        if head < _MIN_HEAD_TOKENS or keep == 0:
            return False
        if self.cached_prefix(prompt[:head]) == head:
            return False
        key = tuple(prompt[:head])
        state = self.heads.get(key)
        if state is not None:
            self.heads.move_to_end(key)
            self.llama.load_state(state)
            return True
        self.save_head(key, keep=keep)
        return False

    def save_head(self, head: tuple[int, ...], *, keep: int) -> None:
        """Evaluate `head` from an empty KV cache and save its state (lock held)."""
        self.llama.reset()  # type: ignore[no-untyped-call]
        self.llama.eval(head)
        state = self.llama.save_state()
        # save_state copies one row of logits per token (600 KB each). generate always
        # re-evaluates at least one token after a restore, so keep one row, which
        # load_state broadcasts.
        state.scores = state.scores[-1:].copy()
        self.heads[head] = state
        while len(self.heads) > keep:
            self.heads.popitem(last=False)


# One model per (file, context size, threads) in the process: 1-2 GB each.
_models: dict[tuple[Path, int, int], _Loaded] = {}
_models_lock = threading.Lock()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@lru_cache(maxsize=64)
def grammar_for(schema: type[BaseModel]) -> LlamaGrammar:
    """A llama.cpp grammar accepting exactly the JSON that `schema` describes (cached)."""
    from llama_cpp.llama_grammar import LlamaGrammar

    return LlamaGrammar.from_json_schema(json.dumps(schema.model_json_schema()), verbose=False)


def _failed(name: str, error: Exception) -> ModelError:
    return ModelError(f"{name}: llama.cpp failed: {type(error).__name__}", "local")


class LlamaChatModel:
    """ChatModel backed by a local GGUF file; the model loads on first use."""

    def __init__(
        self,
        model_path: Path,
        *,
        threads: int = 0,
        context_tokens: int = 4096,
        name: str = "local",
        price: Price | None = None,
        saved_system_prompts: int = SAVED_SYSTEM_PROMPTS,
    ) -> None:
        self.name = name
        self.model_path = Path(model_path)
        self.threads = threads or _cores()
        self.context_tokens = context_tokens
        self.price = price or Price(input_per_mtok=0, output_per_mtok=0)
        self.saved_system_prompts = saved_system_prompts
        # Diagnostics of the most recent call on this instance (racy under concurrency).
        self.last_timings: CallTimings | None = None

    def load(self) -> float:
        """Load the model now (blocking) if this process has not yet; return the seconds spent."""
        started = time.perf_counter()
        self._loaded()
        return time.perf_counter() - started

    def preload(self, system_prompts: Sequence[str]) -> None:
        """Load the weights and save each fixed system prompt's state (candor.warmup)."""
        self.save_system_prompts(system_prompts)

    def save_system_prompts(self, systems: Sequence[str]) -> int:
        """Evaluate and save each system prompt not saved yet (blocking), so that even its
        first call pays only for what follows it; return how many were evaluated.

        For a warm start: the graph's five take about 570 tokens, 9-13 s on two cores.
        """
        loaded = self._loaded()
        saved = 0
        with loaded.lock:
            for system in systems:
                tokens, head = self._prompt(loaded, [{"role": "system", "content": system}])
                key = tuple(tokens[:head])
                if head < _MIN_HEAD_TOKENS or not self.saved_system_prompts or key in loaded.heads:
                    continue
                try:
                    loaded.save_head(key, keep=self.saved_system_prompts)
                except (RuntimeError, ValueError) as e:
                    raise ModelError(
                        f"{self.name}: llama.cpp failed: {type(e).__name__}", "local"
                    ) from e
                saved += 1
        return saved

    async def structured(
        self, messages: Sequence[Message], schema: type[M], *, max_tokens: int = 128
    ) -> Structured[M]:
        grammar = grammar_for(schema)
        completion = await asyncio.to_thread(
            self._complete,
            messages,
            max_tokens=max_tokens,
            grammar=grammar,
            repeat_penalty=1.0,  # JSON repeats its punctuation by design
        )
        try:
            value = schema.model_validate_json(completion.text)
        except ValidationError as e:
            # The output can quote the visitor: the log gets its kind, not its text.
            cut = completion.finish_reason == "length"
            raise ModelError(
                f"{self.name}: output does not match {schema.__name__}",
                "truncated" if cut else "off_schema",
            ) from withheld(e)
        return Structured(value, self._usage(completion))

    async def judge(self, messages: Sequence[Message], options: Sequence[str]) -> Judged:
        return await asyncio.to_thread(self._judge, messages, options)

    async def text(self, messages: Sequence[Message], *, max_tokens: int = 256) -> Text:
        return await read_text(self.stream(messages, max_tokens=max_tokens))

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256
    ) -> AsyncIterator[TextPiece]:
        async for piece in iterate_in_thread(lambda: self._pieces(messages, max_tokens)):
            yield piece

    def prompt_tokens(self, messages: Sequence[Message]) -> list[int]:
        """The ChatML prompt for `messages`, as tokens, ending with an open assistant turn."""
        return self._prompt(self._loaded(), messages)[0]

    def _usage(self, completion: _Completion) -> Usage:
        return Usage(
            tokens_in=completion.tokens_in,
            tokens_out=completion.tokens_out,
            cost_usd=self.price.cost(completion.tokens_in, completion.tokens_out),
            tokens_evaluated=completion.tokens_evaluated,
        )

    def _loaded(self) -> _Loaded:
        key = (self.model_path.resolve(), self.context_tokens, self.threads)
        with _models_lock:
            loaded = _models.get(key)
            if loaded is None:
                count = _PromptCount()
                loaded = _models[key] = _Loaded(self._load_llama(count), count)
            return loaded

    def _load_llama(self, count: _PromptCount) -> Llama:
        if not self.model_path.is_file():
            raise ConfigurationError(f"local chat model {self.model_path} is not a file")
        try:
            from llama_cpp import Llama
        except ImportError as e:
            raise ConfigurationError(
                "llama-cpp-python is not installed: run `make install` "
                "(or `pip install -e '.[local]'`)"
            ) from e

        class CountingLlama(Llama):
            """Llama that reports each decode to `count` (see _PromptCount)."""

            def eval(self, tokens: Sequence[int]) -> None:
                start = self.n_tokens
                super().eval(tokens)
                count.decoded(start, len(tokens))

        try:
            return CountingLlama(
                model_path=str(self.model_path),
                n_ctx=self.context_tokens,
                n_threads=self.threads,
                n_threads_batch=self.threads,
                n_batch=512,
                seed=_SEED,
                verbose=False,
            )
        except ValueError as e:  # llama-cpp-python's "Failed to load model from file"
            raise ConfigurationError(f"cannot load {self.model_path}: {e}") from e

    @staticmethod
    def _prompt(loaded: _Loaded, messages: Sequence[Message]) -> tuple[list[int], int]:
        """The prompt tokens, and how many of them are the leading system turn (or 0)."""
        if not messages:
            raise ValueError("a chat call needs at least one message")
        tokens: list[int] = []
        head = 0
        for message in messages:
            tokens += loaded.im_start
            tokens += loaded.plain(f"{message['role']}\n{message['content']}")
            tokens += loaded.im_end
            tokens += loaded.newline
            if not head:
                head = len(tokens) if message["role"] == "system" else -1
        tokens += loaded.im_start
        tokens += loaded.plain("assistant\n")
        return tokens, max(head, 0)

    def _begin(self, loaded: _Loaded, messages: Sequence[Message], max_tokens: int) -> _Call:
        """Check the prompt fits, reset llama.cpp's counters and restore a saved head.

        Call with the lock held.
        """
        import llama_cpp

        prompt, head = self._prompt(loaded, messages)
        if len(prompt) + max_tokens > self.context_tokens:
            raise ModelError(
                f"{self.name}: prompt of {len(prompt)} tokens + {max_tokens} to generate "
                f"exceeds the context of {self.context_tokens}",
                "local",
            )
        llama_cpp.llama_perf_context_reset(loaded.llama.ctx)
        loaded.count.begin(len(prompt))
        started = time.perf_counter()
        try:
            restored = loaded.start_from_head(prompt, head, keep=self.saved_system_prompts)
        except (RuntimeError, ValueError) as e:
            raise _failed(self.name, e) from e
        return _Call(prompt, restored, started)

    def _finish(self, loaded: _Loaded, call: _Call) -> CallTimings:
        """What the call that just ended ran (lock held); also kept as `last_timings`."""
        import llama_cpp

        elapsed = time.perf_counter() - call.started
        perf = llama_cpp.llama_perf_context(loaded.llama.ctx)
        timings = CallTimings(
            prompt_tokens=len(call.prompt),
            prompt_evaluated=loaded.count.evaluated,
            head_restored=call.restored,
            prompt_seconds=float(perf.t_p_eval_ms) / 1000,
            generated_tokens=int(perf.n_eval),
            decode_seconds=float(perf.t_eval_ms) / 1000,
            total_seconds=elapsed,
        )
        self.last_timings = timings
        return timings

    def _complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        grammar: LlamaGrammar | None,
        repeat_penalty: float,
    ) -> _Completion:
        loaded = self._loaded()
        with loaded.lock:
            call = self._begin(loaded, messages, max_tokens)
            try:
                result: Any = loaded.llama.create_completion(
                    call.prompt,
                    max_tokens=max_tokens,
                    temperature=0.0,
                    repeat_penalty=repeat_penalty,
                    stop=[IM_END, IM_START],
                    seed=_SEED,
                    grammar=grammar,
                )
            except (RuntimeError, ValueError) as e:
                raise ModelError(
                    f"{self.name}: llama.cpp failed: {type(e).__name__}", "local"
                ) from e
            timings = self._finish(loaded, call)
        choice = result["choices"][0]
        usage = result["usage"]
        return _Completion(
            text=str(choice["text"]),
            finish_reason=str(choice.get("finish_reason") or ""),
            tokens_in=int(usage["prompt_tokens"]),
            tokens_out=int(usage["completion_tokens"]),
            tokens_evaluated=timings.prompt_evaluated,
        )

    def _judge(self, messages: Sequence[Message], options: Sequence[str]) -> Judged:
        """The next-token distribution after the prompt, read at each option's first token.

        Nothing is sampled: the prompt is evaluated (from the longest prefix the KV
        cache holds, at least its last token, whose logits are the ones read) and the
        softmax is summed over the ways an option can start a reply ("yes", "Yes",
        " yes"), then normalised over the options.
        """
        loaded = self._loaded()
        with loaded.lock:
            call = self._begin(loaded, messages, 1)
            llama = loaded.llama
            prompt = call.prompt
            cached = min(loaded.cached_prefix(prompt), len(prompt) - 1)
            try:
                llama.n_tokens = cached
                llama.eval(prompt[cached:])
                logits = np.ctypeslib.as_array(
                    llama._ctx.get_logits_ith(-1), shape=(llama.n_vocab(),)
                ).astype(np.float64)
            except (RuntimeError, ValueError) as e:
                raise ModelError(
                    f"{self.name}: llama.cpp failed: {type(e).__name__}", "local"
                ) from e
            timings = self._finish(loaded, call)
        weights = np.exp(logits - logits.max())
        starts = {option: set(loaded.starts_of(option)) for option in options}
        # A token that could open two options ("N" for "no" and "never") says neither.
        common = {t for a in options for b in options if a != b for t in starts[a] & starts[b]}
        mass = {option: float(weights[sorted(starts[option] - common)].sum()) for option in options}
        total = sum(mass.values())
        if total <= 0:
            raise ModelError(f"{self.name}: no probability on any of {list(options)}", "no_option")
        probabilities = {option: value / total for option, value in mass.items()}
        usage = Usage(
            len(prompt),
            1,
            self.price.cost(len(prompt), 1),
            tokens_evaluated=timings.prompt_evaluated,
        )
        return Judged(probabilities, usage, mass=min(total / float(weights.sum()), 1.0))

    def _pieces(self, messages: Sequence[Message], max_tokens: int) -> Iterator[TextPiece]:
        """Free text as llama.cpp decodes it, then the usage (runs in a worker thread).

        Closing the generator early stops the decoding and releases the lock.
        """
        loaded = self._loaded()
        with loaded.lock:
            call = self._begin(loaded, messages, max_tokens)
            llama = loaded.llama
            finish_reason = ""
            try:
                chunks: Any = llama.create_completion(
                    call.prompt,
                    max_tokens=max_tokens,
                    temperature=0.0,
                    repeat_penalty=TEXT_REPEAT_PENALTY,
                    stop=[IM_END, IM_START],
                    seed=_SEED,
                    stream=True,
                )
                for chunk in chunks:
                    choice = chunk["choices"][0]
                    finish_reason = choice.get("finish_reason") or finish_reason
                    if choice["text"]:
                        yield str(choice["text"])
            except (RuntimeError, ValueError) as e:
                raise ModelError(
                    f"{self.name}: llama.cpp failed: {type(e).__name__}", "local"
                ) from e
            # Streamed chunks carry no usage. Every generated token but a last one
            # cut off by max_tokens has been evaluated into the KV cache (measured:
            # this equals the unstreamed call's completion_tokens).
            evaluated = llama.n_tokens - len(call.prompt)
            tokens_out = evaluated + (1 if finish_reason == "length" else 0)
            timings = self._finish(loaded, call)
        yield self._usage(
            _Completion("", finish_reason, len(call.prompt), tokens_out, timings.prompt_evaluated)
        )
