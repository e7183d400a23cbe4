"""What a claim is: where the paper's value and ours live, and the verdicts a claim can get.

The dataclasses here (:class:`PaperRef`, :class:`RecordRef`, :class:`Claim`,
:class:`NotebookInfo`) describe the report's tables; the tables themselves are data,
``recagents/resources/claims.json`` and ``notebooks.json``, read and validated by
:mod:`recagents.report.loading`. The verdict names are code, because the rules of
:mod:`recagents.report.verdicts` return them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

REPRODUCED = "reproduced"
DIRECTION_ONLY = "direction only"
INCONCLUSIVE = "inconclusive (underpowered)"
"""The sample cannot decide: its interval is wider than the effect the claim is about, its n is
below the claim's ``min_n``, or a no-difference claim rests on methods that both did nothing."""
NOT_REPRODUCED = "not reproduced"
NOT_COMPARABLE = "not comparable"
OURS_ONLY = "ours only"
"""A row without a paper number (a protocol check, a demonstration, an experiment a release
makes possible): not a failed comparison; the same rule applied to our values says what we
showed."""
NOT_RUN = "not run"
VERDICTS = (
    REPRODUCED,
    DIRECTION_ONLY,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_COMPARABLE,
    OURS_ONLY,
    NOT_RUN,
)
"""Every verdict the report can give, in the order the summary counts them."""

PERSPECTIVE = "no number in the paper (perspective paper); our demonstration"
PROTOCOL_CHECK = "no paper number: the shared protocol check every later table relies on"


# --------------------------------------------------------------------------------------------
# The claims: data, not numbers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PaperRef:
    """Where the paper's value lives in ``paper_numbers.json``.

    Attributes:
        table: Table id, e.g. ``"AgentCF-T2"``.
        row: Column-to-text filters that select exactly one row; empty when the claim is stated
            in words for the whole table (then ``quote`` says what).
        column: The cell holding the value; ``None`` when the row holds a statement, not a number.
        scale: Multiplies the printed number (``0.01`` for a table printed in percent).
        versus_row: For a comparison, the row of the other arm (default: ``row``).
        versus_column: For a comparison, the column of the other arm (default: ``column``).
        quote: What the paper states when it gives no number for the claim.
    """

    table: str
    row: Mapping[str, str] = field(default_factory=dict)
    column: str | None = None
    scale: float = 1.0
    versus_row: Mapping[str, str] | None = None
    versus_column: str | None = None
    quote: str = ""

    @property
    def has_versus(self) -> bool:
        """Whether the reference names a second arm to compare with."""
        return self.versus_row is not None or self.versus_column is not None


@dataclass(frozen=True)
class RecordRef:
    """Where our value lives in a notebook's records.

    Attributes:
        key: The record name; ``{name}`` placeholders are filled from other records of the same
            notebook (e.g. ``"hr1/AFL ({max_rounds} rounds)"``).
        field: For a dict record, the entry holding the value (e.g. ``"hit"``, ``"rate"``).
        label: A short name for the value in the report (e.g. ``"B+R"``).
    """

    key: str
    field: str | None = None
    label: str = ""


@dataclass(frozen=True)
class Claim:
    """One claim a notebook reproduces, and how ours is compared with the paper's.

    Attributes:
        id: Stable id, e.g. ``"agentcf-br-ndcg10"``.
        notebook: The notebook's stem, e.g. ``"01_agentcf"``.
        description: What is claimed, in a few words.
        paper: Where the paper's value is; ``None`` where the paper has no number.
        ours: The record holding our value (A for ``greater``).
        rule: ``"contains"``, ``"at_least"``, ``"greater"``, ``"above"`` or
            ``"no_amplification"``.
        versus: For ``greater``: the record of B.
        threshold: For ``above``: the value ours must exceed.
        no_paper: Why there is no paper number (shown when ``paper`` is ``None``).
        context: Records shown beside ours (e.g. ``("n_sessions", "max_turns")``).
        note: A caveat specific to this claim.
        llm: Whether our value comes from the notebook's language model (``False`` for a
            baseline such as Random or Pop, which is then not credited to the model).
        chance: For ``contains``: the record of a random baseline on the same candidates. An
            interval that holds the paper's value *and* this baseline's mean cannot tell the
            paper's result from chance, so it is inconclusive; the distance between the two
            is the claim's effect.
        effect: The size of the effect the claim is about, in the units of our value: for
            ``contains`` the tolerance around the paper's value (used when no ``chance`` is
            recorded), for ``greater``/``above`` the claimed difference (default: the paper's
            two numbers' difference), for ``no_amplification`` the smallest shift that counts
            as amplification. An interval whose half-width exceeds it cannot decide.
        effect_basis: Where ``effect`` comes from, in a few words.
        min_n: The smallest sample the claim needs; below it the verdict is inconclusive.
        n_record: The record holding the sample size when ours does not carry an ``n``.
        activity: For ``no_amplification``: what each compared method achieved (e.g. their
            HR@1); when all are zero the methods did nothing and the claim is inconclusive.
        model: Who produced our value when it is not the notebook's model (e.g. the authors'
            recorded gpt-3.5 run that the notebook analyses); shown in the row instead.
        datasets: The datasets (our names, as the notebook records ``dataset``) the paper's
            value was measured on. A run on any other dataset is **not comparable**: a paper
            value is compared only with ours on the same data (empty: not restricted).
        unreleased: Why none of ``datasets`` can be run (no release holds it), from the
            ``unreleased`` table of ``claims.json``; empty when one of them is available.
    """

    id: str
    notebook: str
    description: str
    paper: PaperRef | None
    ours: RecordRef
    rule: str = "contains"
    versus: RecordRef | None = None
    threshold: float | None = None
    no_paper: str = ""
    context: tuple[str, ...] = ()
    note: str = ""
    llm: bool = True
    chance: RecordRef | None = None
    effect: float | None = None
    effect_basis: str = ""
    min_n: int | None = None
    n_record: str | None = None
    activity: tuple[RecordRef, ...] = ()
    datasets: tuple[str, ...] = ()
    model: str = ""
    unreleased: str = ""

    def record_refs(self) -> list[RecordRef]:
        """The records this claim reads (ours, then the comparison's)."""
        return [self.ours, *([self.versus] if self.versus else [])]


@dataclass(frozen=True)
class NotebookInfo:
    """What the report says about one notebook besides its claims.

    Attributes:
        title: Fallback title when the executed notebook cannot be read.
        paper: The paper it reproduces, in a few words.
        deviations: The gist of the notebook's "What this shows" section: what differs from
            the paper, and what the embedded model can and cannot show.
    """

    title: str
    paper: str
    deviations: tuple[str, ...]
