"""Next-token log-probabilities from final hidden states, a block of rows at a time (needs the ``[real]`` extra).

A ``(tokens, vocabulary)`` array is never held whole: at 2,000 tokens it is 393 MB for SmolLM2's 49,152 words and
2.1 GB for Gemma 3's 262,144.  The replays' rows come in blocks of :func:`block_rows` (:func:`logp_blocks`), and
the full cache's are recomputed from its hidden states in the blocks they were always computed in
(:class:`FullLogp`: for SmolLM2 rows ``0 .. 255``, ``256 .. 511``, ...; the LM head's matrix product on another
set of rows may round differently), the last block kept, so a replay's consecutive blocks cost about one more LM
head pass.  A block holds at most :data:`BLOCK_FLOATS` floats (50 MB): 256 rows of SmolLM2's vocabulary, 48 of
Gemma's; the metrics of a block (:func:`realtrace.quality.metrics.step_metrics`) make a few temporaries of its size.
"""

from __future__ import annotations

import numpy as np

LOGIT_BLOCK = 256  # rows of logits at a time, at most (SmolLM2's 256 x 49,152 floats = 50 MB)
BLOCK_FLOATS = LOGIT_BLOCK * 49_152  # the floats of a block: SmolLM2's, whose results were computed in such blocks


def block_rows(lm) -> int:
    """Rows per block of log-probabilities for ``lm``'s vocabulary: :data:`LOGIT_BLOCK`, or fewer so that a block
    holds at most :data:`BLOCK_FLOATS` floats (Gemma 3's 262,144 words: 48 rows)."""
    vocab = lm.model.get_output_embeddings().out_features
    return max(1, min(LOGIT_BLOCK, BLOCK_FLOATS // vocab))


def logp_blocks(lm, hidden, r0: int, r1: int, first_row: int = 0):
    """Next-token log-probabilities (float32, on the host) of rows ``r0 .. r1-1`` in blocks of :func:`block_rows`
    rows; ``hidden[i]`` (on the model's device) is row ``first_row + i``."""
    torch, rows = lm.torch, block_rows(lm)
    for a in range(r0, r1, rows):
        b = min(r1, a + rows)
        with torch.no_grad():
            yield torch.log_softmax(lm.model.lm_head(hidden[a - first_row:b - first_row]), dim=-1).cpu().numpy()


class FullLogp:
    """The full cache's log-probabilities of rows ``0 .. rows-1`` (module docstring): :meth:`block` gives any
    range, :attr:`argmax` and :meth:`target_logp` were read in one sweep when it was made."""

    def __init__(self, lm, hidden, rows: int, targets: np.ndarray):
        self.lm, self.hidden, self.rows, self.step = lm, hidden, rows, block_rows(lm)
        self._last: tuple[int, np.ndarray] | None = None
        argmax, picked = [], []
        for a, block in zip(range(0, rows, self.step), logp_blocks(lm, hidden, 0, rows)):
            argmax.append(block.argmax(axis=1))
            picked.append(block[np.arange(block.shape[0]), targets[a:a + block.shape[0]]])
        self.argmax = np.concatenate(argmax) if argmax else np.zeros(0, np.int64)
        self.picked = np.concatenate(picked) if picked else np.zeros(0, np.float32)  # log p(target) per row

    def block(self, r0: int, r1: int) -> np.ndarray:
        """Rows ``r0 .. r1-1`` ``(r1 - r0, vocabulary)``, from the aligned blocks that cover them."""
        out, step = [], self.step
        for a in range(r0 - r0 % step, r1, step):
            if self._last is None or self._last[0] != a:
                self._last = (a, next(logp_blocks(self.lm, self.hidden, a, min(a + step, self.rows))))
            out.append(self._last[1][max(r0 - a, 0):min(r1, a + step) - a])
        return np.concatenate(out)


__all__ = ["BLOCK_FLOATS", "FullLogp", "LOGIT_BLOCK", "block_rows", "logp_blocks"]
