"""ItemCF, the item-to-item similarity behind InteRecAgent's soft filter.

:class:`ItemCF` counts co-occurrences in the known interactions (``C_ij / sqrt(N_i * N_j)``);
``soft_filter`` keeps the candidates most similar to the seed titles and stores the scores
for ``rank(schema="similarity")``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import sparse

from recagents.columns import ITEM, USER


class ItemCF:
    """Item-to-item similarity from co-occurrence: ``C_ij / sqrt(N_i * N_j)``.

    ``C_ij`` counts the users who interacted with both items and ``N_i`` those who
    interacted with item ``i`` (repeats of a pair count once). The diagonal is zero, so an
    item is not similar to itself. Stored as a sparse matrix over ``item_ids``.

    Args:
        similarity: Square sparse matrix aligned with ``item_ids``.
        item_ids: Item ids of the rows and columns.
    """

    def __init__(self, similarity: sparse.spmatrix, item_ids: Sequence[str]) -> None:
        if similarity.shape != (len(item_ids), len(item_ids)):
            raise ValueError(f"similarity is {similarity.shape}, ids are {len(item_ids)}")
        self.matrix = sparse.csr_matrix(similarity)
        self.item_ids = tuple(item_ids)
        self.index = {item: i for i, item in enumerate(self.item_ids)}

    @classmethod
    def from_interactions(cls, interactions: pd.DataFrame, item_ids: Sequence[str]) -> ItemCF:
        """Count co-occurrences in ``interactions`` (train, or train + valid).

        Args:
            interactions: ``[user_id, item_id, ...]``; items outside ``item_ids`` are ignored.
            item_ids: The catalogue (rows and columns of the matrix).
        """
        index = {item: i for i, item in enumerate(item_ids)}
        pairs = interactions[[USER, ITEM]].drop_duplicates()
        pairs = pairs[pairs[ITEM].isin(index)]
        users, _ = pd.factorize(pairs[USER])
        columns = pairs[ITEM].map(index).to_numpy(dtype=np.int64)
        n_users = int(users.max()) + 1 if len(users) else 0
        x = sparse.csr_matrix(
            (np.ones(len(pairs)), (users, columns)), shape=(n_users, len(item_ids))
        )
        co = (x.T @ x).tocsr()
        counts = np.asarray(x.sum(axis=0)).ravel()
        inv = np.divide(1.0, np.sqrt(counts), out=np.zeros_like(counts), where=counts > 0)
        scale = sparse.diags(inv)
        sim = (scale @ co @ scale).tocsr()
        sim = (sim - sparse.diags(sim.diagonal())).tocsr()
        sim.eliminate_zeros()
        return cls(sim, item_ids)

    def similarity(self, a: str, b: str) -> float:
        """Similarity of two items."""
        return float(self.matrix[self.index[a], self.index[b]])

    def scores(self, items: Sequence[str], seeds: Sequence[str]) -> np.ndarray:
        """Mean similarity of each of ``items`` to the ``seeds``."""
        if not seeds:
            raise ValueError("scores needs at least one seed")
        rows = [self.index[i] for i in items]
        cols = [self.index[s] for s in seeds]
        block = self.matrix[rows][:, cols]
        return np.asarray(block.mean(axis=1)).ravel()
