"""What a model's tokenizer needs beyond transformers (needs the ``[real]`` extra): the ids every sequence begins with
(:func:`sequence_start`), and the tokenizer of a GGUF file whose vocabulary is a SentencePiece BPE model stored
without merges (Gemma), rebuilt as the BPE it is (:func:`sentencepiece_bpe`).

Why rebuild.  A SentencePiece BPE vocabulary in GGUF (``tokenizer.ggml.model = "llama"``) keeps each piece's score, the
negative of its merge rank, and no merge list.  transformers 5.2 reads a Gemma-family file with a converter that
makes a *Unigram* model of those scores (a rank read as a log-probability favours short pieces: "world" comes out
"▁w", "or", "ld"), and a copy saved by ``save_pretrained`` reloads as its ``GemmaTokenizer``, a BPE with no merges
at all: one token per character.  Neither is how the model was trained.  Measured on six paragraphs of the
reference prose (1,740 characters) with Gemma 3 270M after its BOS: 378 tokens and 0.671 nats per character with
the BPE rebuilt here, 728 tokens and 1.687 nats/char with the Unigram, 1,740 tokens and 6.011 nats/char one character
per token (``docs/real-traces.md``, Models).

The rule (Kudo and Richardson, "SentencePiece", EMNLP 2018; its BPE encoder): repeatedly join the adjacent pair of
symbols whose concatenation is a piece of the vocabulary with the highest score.  A BPE whose merges are every split
``(l, r)`` of every normal piece ``l + r`` with ``l`` and ``r`` pieces, ranked by the score of ``l + r``, applies
exactly that rule; SentencePiece's byte fallback, its user-defined pieces (matched whole, before the model) and its
control pieces are kept as such."""

from __future__ import annotations

from pathlib import Path

from kvcore.errors import ParameterError

# SentencePiece piece types as GGUF stores them (tokenizer.ggml.token_type)
NORMAL, CONTROL, USER_DEFINED = 1, 3, 4
REBUILT = "SentencePiece BPE, merges ranked by the GGUF's piece scores (realtrace.tokenizer)"


_FACTS: dict[str, dict] = {}  # GGUF file -> what its metadata says of its tokenizer (gguf_facts)


def gguf_metadata(path: Path) -> dict:
    """The metadata fields of the GGUF file ``path`` (``gguf.GGUFReader(path).fields``).  Not kept: for Gemma's
    262,144 pieces they are about 1 GB of small objects and take ~10 s to parse."""
    import gguf

    return gguf.GGUFReader(path).fields


def gguf_facts(path: Path) -> dict:
    """Of the GGUF file ``path``, read once per process: ``rebuild`` (transformers would read its tokenizer as a
    Unigram, module docstring: a Gemma-family architecture, a SentencePiece vocabulary, no merges) and ``bos``
    (its ``tokenizer.ggml.add_bos_token``)."""
    if str(path) not in _FACTS:
        fields = gguf_metadata(path)
        arch, model = fields.get("general.architecture"), fields.get("tokenizer.ggml.model")
        bos = fields.get("tokenizer.ggml.add_bos_token")
        _FACTS[str(path)] = {"rebuild": arch is not None and str(arch.contents()).startswith("gemma")
                             and model is not None and model.contents() == "llama"
                             and "tokenizer.ggml.merges" not in fields,
                             "bos": bos is not None and bool(bos.contents())}
    return _FACTS[str(path)]


def needs_rebuild(source, path: Path) -> bool:
    """Whether the tokenizer of ``source`` (a :class:`realtrace.model.ModelSource`), read from ``path``, is rebuilt
    here: a registered model declares it (:attr:`realtrace.model.Registered.rebuilt`, no file read), a GGUF file's
    metadata says it (:func:`gguf_facts`), a directory's tokenizer is its own."""
    if source.registered:
        return source.registered.rebuilt
    return Path(path).is_file() and gguf_facts(path)["rebuild"]


def sentencepiece_bpe(path: Path):
    """The BPE tokenizer (transformers' ``GemmaTokenizer``) of the GGUF file ``path``, rebuilt from its pieces and
    scores (module docstring); it encodes no special token by itself (the BOS is the caller's:
    :func:`sequence_start`)."""
    from tokenizers import AddedToken
    from transformers.models.gemma.tokenization_gemma import GemmaTokenizer

    fields = gguf_metadata(path)
    pieces = fields["tokenizer.ggml.tokens"].contents()
    kinds = fields["tokenizer.ggml.token_type"].contents()
    scores = fields["tokenizer.ggml.scores"].contents()
    normal = {p for p, k in zip(pieces, kinds) if k == NORMAL}
    merges = []
    for score, piece in sorted(((s, p) for p, k, s in zip(pieces, kinds, scores) if k == NORMAL and len(p) > 1),
                               key=lambda sp: -sp[0]):  # stable: equal scores keep the file's order
        merges.extend((piece[:j], piece[j:]) for j in range(1, len(piece))
                      if piece[:j] in normal and piece[j:] in normal)

    def named(field: str) -> str:
        return pieces[int(fields[f"tokenizer.ggml.{field}"].contents())]

    special = {f"{role}_token": named(f"{key}_token_id") for role, key in
               (("bos", "bos"), ("eos", "eos"), ("unk", "unknown"), ("pad", "padding"))
               if f"tokenizer.ggml.{key}_token_id" in fields}
    tok = GemmaTokenizer(vocab={p: i for i, p in enumerate(pieces)}, merges=merges, add_bos_token=False,
                         add_eos_token=False, **special)
    tok.add_tokens([AddedToken(p, special=False, normalized=False) for p, k in zip(pieces, kinds)
                    if k == USER_DEFINED])
    tok.add_tokens([AddedToken(p, special=True, normalized=False) for p, k in zip(pieces, kinds) if k == CONTROL],
                   special_tokens=True)
    return tok


def sequence_start(source, tokenizer) -> tuple[int, ...]:
    """The token ids every sequence of ``source`` (a :class:`realtrace.model.ModelSource`) begins with: ``(bos,)`` when the model declares that its
    sequences begin with the BOS token, else ``()``.  Every prompt is tokenized part by part without special
    tokens and then prefixed with these (:func:`realtrace.quality.inputs.tokenize_prompts`, the capture).

    Who declares it: a registered model its :attr:`Registered.bos` (Gemma 3: yes -- without <bos> its full cache
    answers ``needle-400-d10`` wrong, with it right; SmolLM2: no, as its committed results were computed); a GGUF
    file its metadata ``tokenizer.ggml.add_bos_token``; a model directory its ``tokenizer_config.json``'s
    ``add_bos_token``.  Read from the source, not from ``tokenizer``: a tokenizer saved by ``save_pretrained`` (the
    quality cache's de-quantized copy) does not keep the GGUF's flag."""
    if source.registered:
        wants = source.registered.bos
    elif source.kind == "gguf":
        wants = gguf_facts(source.path)["bos"]
    else:
        import json

        config = source.path / "tokenizer_config.json"
        wants = config.is_file() and bool(json.loads(config.read_text(encoding="utf-8")).get("add_bos_token"))
    if not wants:
        return ()
    if tokenizer.bos_token_id is None:
        raise ParameterError(f"--model {source.spec}: its sequences begin with a BOS token its tokenizer lacks")
    return (int(tokenizer.bos_token_id),)


__all__ = ["REBUILT", "gguf_facts", "gguf_metadata", "needs_rebuild", "sentencepiece_bpe", "sequence_start"]
