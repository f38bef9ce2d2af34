"""Tiny randomly initialised causal language models of several architectures, built from transformers
configurations and saved with ``save_pretrained`` (weights, configuration and a word-level tokenizer) into a
directory that ``--model`` accepts: no download, a few layers, hidden size 32, a vocabulary of 96 words.

``initializer_range`` 0.4 (transformers' default is 0.02) makes the attention rows far from uniform, so that an
eviction changes the output by much more than float rounding and the attention-ranked rules (TOVA, H2O) meet no
near-ties."""

from __future__ import annotations

from pathlib import Path

VOCAB = 96
COMMON = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 256,
          "initializer_range": 0.4, "tie_word_embeddings": False}
MISTRAL_WINDOW = 7
GEMMA_WINDOW = 6


def configs() -> dict:
    """Name -> configuration: Llama (grouped-query), Qwen3 (QK-norm), Mistral (every layer a sliding window of 7),
    Gemma 3 (multi-query, QK-norm, sliding windows of 6 on layers 0 and 2, full attention on layer 1)."""
    from transformers import Gemma3TextConfig, LlamaConfig, MistralConfig, Qwen3Config

    return {"llama": LlamaConfig(**COMMON),
            "qwen3": Qwen3Config(**COMMON),
            "mistral": MistralConfig(**COMMON, sliding_window=MISTRAL_WINDOW),
            "gemma3": Gemma3TextConfig(**{**COMMON, "num_key_value_heads": 1}, sliding_window=GEMMA_WINDOW,
                                       layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                                       query_pre_attn_scalar=8)}


ARCHITECTURES = ("llama", "qwen3", "mistral", "gemma3")


def word_tokenizer():
    """A word-level fast tokenizer over ``w0 .. w95`` (whitespace-split), built offline."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"w{i}": i for i in range(VOCAB - 1)} | {"[UNK]": VOCAB - 1}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


def save_tiny_model(directory: Path, arch: str, seed: int = 0) -> Path:
    """The model ``arch`` with weights drawn from ``torch.manual_seed(seed)``, and the tokenizer, saved in
    ``directory``; returns it."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(configs()[arch], dtype=torch.float32)
    model.save_pretrained(directory)
    word_tokenizer().save_pretrained(directory)
    return Path(directory)
