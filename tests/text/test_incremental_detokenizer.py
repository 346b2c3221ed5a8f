"""Streaming detokenization: deltas never split a character and add up to the full decode."""

from __future__ import annotations

import json
import random

import pytest
from text_fixtures import TINY_CHAT_DIR, load_ours
from tokenizers import Tokenizer as BackendTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from dgjax.text.detokenizer import IncrementalDetokenizer

MULTIBYTE_TEXTS = [
    "Hello, world! Plain ASCII first.",
    "中文测试：你好，世界！日本語のテキスト。한국어 텍스트",
    "emoji 🙂👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 music 𝄞 end",
    "mixed: café naïve Ångström — “quotes” … ∑∫√ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "🙂",
]


def stream(detok: IncrementalDetokenizer, ids, chunk_sizes=None) -> list[str]:
    deltas, i = [], 0
    rng = random.Random(len(ids))
    while i < len(ids):
        n = 1 if chunk_sizes is None else rng.choice(chunk_sizes)
        deltas.append(detok.add(ids[i : i + n]) if n > 1 else detok.add(ids[i]))
        i += n
    deltas.append(detok.flush())
    return deltas


def with_special_tokens(tokenizer, ids: list[int], seed: int) -> list[int]:
    rng = random.Random(seed)
    specials = tokenizer.all_special_ids
    out = []
    for i in ids:
        if rng.random() < 0.15:
            out.append(rng.choice(specials))
        out.append(i)
    return out


def encode_with_special_tokens(tokenizer, text: str, seed: int) -> list[int]:
    """The text's words encoded separately, with special tokens between some of them."""
    rng = random.Random(seed)
    specials = tokenizer.all_special_ids
    ids: list[int] = []
    for n, word in enumerate(text.split(" ")):
        if n and rng.random() < 0.5:
            ids.append(rng.choice(specials))
        ids += tokenizer.encode(word if n == 0 else " " + word, add_special_tokens=False)
    return ids


@pytest.mark.parametrize("skip_special_tokens", [True, False])
def test_deltas_concatenate_to_the_full_decode_without_partial_characters(tokenizer_dir, skip_special_tokens):
    tok = load_ours(tokenizer_dir)
    for n, text in enumerate(MULTIBYTE_TEXTS):
        ids = encode_with_special_tokens(tok, text, seed=n)
        for chunks in (None, [1, 2, 3]):
            deltas = stream(IncrementalDetokenizer(tok, skip_special_tokens), ids, chunks)
            assert "".join(deltas) == tok.decode(ids, skip_special_tokens=skip_special_tokens)
            assert not any("\ufffd" in d for d in deltas), deltas
            assert deltas[-1] == ""  # valid text: nothing left to flush


def test_a_multi_token_character_is_held_until_complete():
    tok = load_ours(TINY_CHAT_DIR)
    ids = tok.encode("🙂", add_special_tokens=False)
    assert len(ids) > 1  # byte-level pieces of one character
    detok = IncrementalDetokenizer(tok)
    assert [detok.add(i) for i in ids] == [""] * (len(ids) - 1) + ["🙂"]


@pytest.mark.parametrize("skip_special_tokens", [True, False])
def test_random_ids_including_invalid_utf8_still_add_up(tokenizer_dir, skip_special_tokens):
    tok = load_ours(tokenizer_dir)
    rng = random.Random(7)
    for _ in range(30):
        ids = [rng.randrange(tok.vocab_size) for _ in range(rng.randint(1, 40))]
        ids = with_special_tokens(tok, ids, seed=rng.randrange(1000))
        for chunks in (None, [1, 4]):
            deltas = stream(IncrementalDetokenizer(tok, skip_special_tokens), ids, chunks)
            assert "".join(deltas) == tok.decode(ids, skip_special_tokens=skip_special_tokens)


def test_byte_tokens_of_many_characters_add_up():
    """Every byte of a multi-byte text as its own token: the hardest case for holding back."""
    tok = load_ours(TINY_CHAT_DIR)
    text = "".join(MULTIBYTE_TEXTS[1:])
    ids = [tok.token_to_id(piece) for piece in _byte_level_pieces(text.encode())]
    deltas = stream(IncrementalDetokenizer(tok), ids)
    assert "".join(deltas) == text
    assert not any("\ufffd" in d for d in deltas)


def _byte_level_pieces(data: bytes) -> list[str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, map(chr, cs)))
    return [table[b] for b in data]


@pytest.fixture(scope="module")
def metaspace_tokenizer() -> BackendTokenizer:
    """A Llama-2-style SentencePiece BPE (▁ spaces, byte fallback, leading space stripped on decode)."""
    tok = BackendTokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog " * 20, "hello world " * 20], trainer)
    # Byte tokens are ordinary vocabulary entries in SentencePiece models, not special added tokens.
    serialized = json.loads(tok.to_str())
    serialized["added_tokens"] = [t for t in serialized["added_tokens"] if not t["content"].startswith("<0x")]
    return BackendTokenizer.from_str(json.dumps(serialized))


def test_position_dependent_decoders_keep_the_space_after_the_prompt(metaspace_tokenizer):
    tok = metaspace_tokenizer
    prompt = tok.encode("the quick brown").ids
    generated = tok.encode("the fox jumps 😀 over 你好 the dog").ids[1:]  # continue mid-sentence
    full = tok.decode(prompt + generated)
    context_text = tok.decode(prompt[-5:])
    deltas = stream(IncrementalDetokenizer(tok, prompt_ids=prompt), generated)
    assert "".join(deltas) == tok.decode(prompt[-5:] + generated)[len(context_text) :]
    assert full.endswith("".join(deltas)) and "".join(deltas).startswith(" fox")
    assert not any("\ufffd" in d for d in deltas)
    no_context = stream(IncrementalDetokenizer(tok), generated)
    assert "".join(no_context) == tok.decode(generated) == "fox jumps 😀 over 你好 the dog"
