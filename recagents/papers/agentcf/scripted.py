"""A skilled scripted AgentCF: every side of the loop as a few readable rules, no LLM.

Why: the embedded 135M model picks the first option whatever it holds and rewrites memories
into noise, so with it collaborative reflection never shows what it does. This policy plays
every role of AgentCF's loop, through the package's own :func:`~.agents.train`,
:func:`~.evaluate.pairwise_probe` and :func:`~.evaluate.rank_candidates` (as a
:class:`~recagents.llm.scripted.ScriptedClient`, named ``scripted:agentcf-skill-<s>``), and
reads only what the prompts hold:

- **user agent, forward choice**: the option whose words overlap most with its
  self-description (:func:`similarity`); a tie (nothing in the memory decides) is a coin.
- **user reflection**: the prompt tells the real outcome. With probability ``skill`` the agent
  writes the words of the item the user really preferred at the front of its memory (which
  holds the newest :attr:`SkilledAgentCF.memory_words` words); otherwise it keeps its memory
  as it was (a reflection that carries no information).
- **item reflection**: with probability ``skill`` the preferred item's description gains the
  words of the user's (updated) memory, "liked by users who like ...": what this user
  teaches the item reaches every later user of it. Otherwise both descriptions stay as they
  were (AgentCF stores only the positive's rewrite, so any rewrite would leak the truth).
- **ranker**: the candidates by overlap between the user-side text (the self-description,
  plus the retrieved past one for B+R) and each candidate's line, ties at random. It has no
  skill: it is the same ruler for every memory, the authors' gpt-3.5 ones included.

Words are lower-case tokens of three or more letters outside :data:`STOPWORDS` (the
prompts' template words among them), so only titles, artists and categories count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recagents.llm.client import ChatRequest
from recagents.llm.scripted import ScriptedClient
from recagents.skill import check_skill, uses_truth

#: Words that say nothing about an item: function words, the prompts' templates, the first
#: self-description's words and compilation words ("greatest hits").
STOPWORDS = frozenset(
    """the and for with that this are was were but not you your they their them from have has
    had who whom what which its also very more most than then such into about over under all
    any each both one two some other only own same can will just don should now out off our
    ours there here when where why how been being does did doing his her hers him she he
    these those too yet amp quot cds called category enjoy enjoys enjoyed like likes liked
    users user fans fan people listeners prefer preferred choice chose option words self
    description describes described taste earlier recently oldest first movie movies
    worked kinds dislike keen interest best greatest hits collection
    """.split()
)

#: A word: letters and digits (``rock``, ``aor``, ``1976``).
_WORD = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> list[str]:
    """The distinct words of ``text`` that can tell items apart, in order of appearance."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(str(text).lower()):
        if len(word) >= 3 and word not in STOPWORDS:
            seen.setdefault(word)
    return list(seen)


def similarity(a: list[str] | set[str], b: list[str] | set[str]) -> float:
    """Cosine similarity of two word sets: shared words over the root of both sizes."""
    left, right = set(a), set(b)
    if not left or not right:
        return 0.0
    return len(left & right) / float(np.sqrt(len(left) * len(right)))


def word_embed(texts: list[str]) -> np.ndarray:
    """Unit bag-of-words vectors of ``texts``: B+R's retrieval with no embedding model."""
    words = [content_words(text) for text in texts]
    vocabulary = {word: index for index, word in enumerate(dict.fromkeys(sum(words, [])))}
    vectors = np.zeros((len(texts), max(1, len(vocabulary))))
    for row, text_words in enumerate(words):
        vectors[row, [vocabulary[word] for word in text_words]] = 1.0
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


# --------------------------------------------------------------------------- reading prompts

_PAIR = re.compile(r"\n1\. (.*?)\n2\. (.*?)\n(?=You |They |Pick )", re.S)
_TOLD = re.compile(r"(?:really preferred|in fact you preferred) [^\n]*?([12])\b")
_CHOSE = re.compile(r"(?:You|They) chose [^\n]*?([12]) and explained")
_RIGHT = ("That was the right choice.", "That was their real preference.")


class PromptError(ValueError):
    """A prompt the scripted policy cannot read (its wording changed)."""


def _content(request: ChatRequest, role: str) -> str:
    return "\n".join(m["content"] for m in request.messages if m["role"] == role)


def _pair(text: str) -> tuple[str, str]:
    """The two option lines of a forward or reflection prompt."""
    found = _PAIR.search(_after(text, "offered two"))
    if found is None:
        raise PromptError("no '1. ... 2. ...' pair in the prompt")
    return found.group(1), found.group(2)


def _after(text: str, marker: str) -> str:
    """What follows the first ``marker`` in ``text``."""
    start = text.find(marker)
    if start < 0:
        raise PromptError(f"no {marker!r} in the prompt")
    return text[start + len(marker) :]


def told_preferred(text: str) -> int:
    """Which option (1 or 2) a reflection prompt says the user really preferred."""
    told = _TOLD.search(text)
    if told is not None:
        return int(told.group(1))
    chose = _CHOSE.search(text)
    if chose is not None and any(right in text for right in _RIGHT):
        return int(chose.group(1))
    raise PromptError("the reflection prompt names no real preference")


def _ranking_parts(text: str) -> tuple[str, list[str]]:
    """A ranking prompt's user-side text and its candidate lines in display order."""
    found = re.search(r"\nCandidate [^\n]*:\n1\. (.*)\nRank all (\d+) candidates", text, re.S)
    if found is None:
        raise PromptError("no numbered candidate list in the ranking prompt")
    block, n = "1. " + found.group(1), int(found.group(2))
    starts = [0]
    for k in range(2, n + 1):
        starts.append(block.find(f"\n{k}. ", starts[-1]) + 1)
        if starts[-1] == 0:
            raise PromptError(f"candidate {k} of {n} is missing")
    ends = [s - 1 for s in starts[1:]] + [len(block)]
    lines = [
        block[s + len(f"{k}. ") : e] for k, (s, e) in enumerate(zip(starts, ends, strict=True), 1)
    ]
    return text[: found.start()], lines


# --------------------------------------------------------------------------- the policy


@dataclass
class SkilledAgentCF:
    """AgentCF's every role as a rule; ``skill`` is the chance a reflection uses the truth.

    Attributes:
        skill: Probability in [0, 1] that a user or item reflection writes what the real
            outcome says (0: reflections carry no information; 1: always the truth).
        seed: Seeds the skill draws and the tie-breaks (same seed, same run).
        memory_words: Words a user's self-description holds, newest first (short-term
            memory; the older ones live on in the saved versions that B+R retrieves).
        taste_words: Words of the user's memory an item reflection passes on to the item.
        item_words: Words of the item's own line an item description keeps.
    """

    skill: float
    seed: int = 0
    memory_words: int = 24
    taste_words: int = 12
    item_words: int = 24
    rng: np.random.Generator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.skill = check_skill(self.skill)
        self.rng = np.random.default_rng(self.seed)

    def __call__(self, request: ChatRequest) -> dict[str, Any]:
        """The reply to one of AgentCF's requests, told apart by its reply schema."""
        keys = set((request.schema or {}).get("properties", {}))
        system, user = _content(request, "system"), _content(request, "user")
        if "choice" in keys:
            return self.choose(system, user)
        if "self_description" in keys:
            return self.reflect_user(system, user)
        if {"preferred", "other"} <= keys:
            return self.reflect_item(user)
        if "ranking" in keys:
            return self.rank(user)
        raise PromptError(f"not an AgentCF request (reply keys {sorted(keys)})")

    def _pick(self, scores: list[float]) -> int:
        """The index of the highest score, ties broken at random."""
        best = np.flatnonzero(np.isclose(scores, max(scores)))
        return int(self.rng.choice(best))

    def choose(self, system: str, user: str) -> dict[str, Any]:
        """Forward: the option closest to the self-description; a tie is a coin."""
        memory = content_words(_after(system, "your own taste:\n"))
        options = [content_words(line) for line in _pair(user)]
        scores = [similarity(memory, words) for words in options]
        index = self._pick(scores)
        shared = sorted(set(memory) & set(options[index]))[:6]
        why = (
            f"It shares {len(shared)} word(s) with my self-description: {', '.join(shared)}."
            if shared
            else "My self-description does not decide between them, so I picked at random."
        )
        return {"choice": index + 1, "explanation": why}

    def reflect_user(self, system: str, user: str) -> dict[str, Any]:
        """User reflection: the preferred item's words first (prob. ``skill``), else unchanged."""
        current = _after(system, "current self-description:\n")
        if not uses_truth(self.rng, self.skill):
            return {"self_description": current}
        learned = _pair(user)[told_preferred(user) - 1]
        words = list(dict.fromkeys(content_words(learned) + content_words(current)))
        return {"self_description": "I like: " + " ".join(words[: self.memory_words]) + "."}

    def reflect_item(self, user: str) -> dict[str, Any]:
        """Item reflection: the preferred item learns the user's taste (prob. ``skill``)."""
        memory = _after(user, "describes their taste like this:\n")
        taste = content_words(memory[: memory.find("\nThey were offered two")])
        options = _pair(user)
        preferred = told_preferred(user)
        first, second = options[preferred - 1], options[2 - preferred]
        if not uses_truth(self.rng, self.skill):
            taste = []
        return {"preferred": self._describe(first, taste), "other": self._describe(second, [])}

    def _describe(self, line: str, taste: list[str]) -> str:
        """An item's new description: its own words, then the taste words it learned."""
        own = content_words(line)[: self.item_words]
        liked = [word for word in taste if word not in own][: self.taste_words]
        text = " ".join(own) + (f". Liked by users who like: {' '.join(liked)}" if liked else "")
        return text[:399] + "."

    def rank(self, user: str) -> dict[str, Any]:
        """Ranker: candidates by overlap with the user-side text, ties in random order."""
        head, lines = _ranking_parts(user)
        memory = content_words(head)
        scores = np.array([similarity(memory, content_words(line)) for line in lines])
        jitter = self.rng.random(len(lines))
        order = np.lexsort((jitter, -scores))
        return {"ranking": [int(i) + 1 for i in order]}


def scripted_client(skill: float, seed: int = 0, **knobs: int) -> ScriptedClient:
    """A :class:`ScriptedClient` answering every AgentCF request with :class:`SkilledAgentCF`."""
    policy = SkilledAgentCF(skill, seed, **knobs)
    return ScriptedClient(policy, name=f"agentcf-skill-{policy.skill:g}")
