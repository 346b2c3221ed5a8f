"""dgjax's Tokenizer gives the ids, text and special tokens that transformers' AutoTokenizer gives."""

from __future__ import annotations

import json
import os
import random

from text_fixtures import TINY_CHAT_DIR, load_hf, load_ours

from dgjax.text.tokenizer import Tokenizer

FIXED_TEXTS = [
    "",
    "Hello, world!",
    "  leading spaces and trailing   ",
    "line one\nline two\r\nline three\n\n\n\ttabbed",
    "def f(x):\n    return x ** 2  # square\n",
    "Numbers: 1234567890 3.14159 -42 1e-9",
    "中文测试：你好，世界！日本語のテキスト。한국어 텍스트",
    "emoji 🙂👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 music 𝄞",
    "combining: e\u0301 cafe\u0301 vs café; Ångström; ﬁ ligature",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|><|endoftext|>text<|im_end|>",
    "<｜begin▁of▁sentence｜>Hi<｜User｜>there<｜Assistant｜>",
    "<|im_start|<|im_end| <|im_end|>< |im_end|>",
    "zero\u200bwidth and\u00a0nbsp and control \x01\x7f chars",
]


def random_texts(seed: int, count: int) -> list[str]:
    """Strings mixing scripts, whitespace, emoji and other tokenizers' special tokens."""
    rng = random.Random(seed)
    pieces = [
        "the", " quick", " brown", "fox", " ", "  ", "\n", "\t", ".", ",", "!?", "'s", "123", "0",
        "你", "好", "世界", "の", "é", "e\u0301", "🙂", "👍🏽", "‍", "🇫", "𝄞", "\u0000", "\ufeff",
        "<|im_end|>", "<|im_start|>", "<|endoftext|>", "<｜User｜>", "<think>", "</think>",
    ]
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 30))) for _ in range(count)]


def test_encode_matches_transformers(tokenizer_dir):
    ours, hf = load_ours(tokenizer_dir), load_hf(tokenizer_dir)
    for text in FIXED_TEXTS + random_texts(0, 60):
        for add_special in (True, False):
            assert ours.encode(text, add_special_tokens=add_special) == hf(
                text, add_special_tokens=add_special
            ).input_ids, (text, add_special)


def test_decode_matches_transformers(tokenizer_dir):
    ours, hf = load_ours(tokenizer_dir), load_hf(tokenizer_dir)
    rng = random.Random(1)
    id_lists = [hf(t).input_ids for t in FIXED_TEXTS + random_texts(2, 20)]
    special = hf.all_special_ids
    id_lists += [
        [rng.choice(special) if rng.random() < 0.1 else rng.randrange(len(hf)) for _ in range(rng.randint(1, 40))]
        for _ in range(40)
    ]
    for ids in id_lists:
        for skip in (True, False):
            assert ours.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)


def test_special_tokens_and_vocabulary_match_transformers(tokenizer_dir):
    ours, hf = load_ours(tokenizer_dir), load_hf(tokenizer_dir)
    assert ours.vocab_size == len(hf)
    assert ours.all_special_ids == hf.all_special_ids
    assert ours.all_special_tokens == hf.all_special_tokens
    assert ours.special_tokens_map == hf.special_tokens_map
    assert (ours.bos_token, ours.bos_token_id) == (hf.bos_token, hf.bos_token_id)
    assert (ours.eos_token, ours.eos_token_id) == (hf.eos_token, hf.eos_token_id)
    assert ours.pad_token_id == hf.pad_token_id
    assert ours.add_bos_token == (hf("x").input_ids[:1] == [hf.bos_token_id])
    rng = random.Random(3)
    for token_id in [rng.randrange(len(hf)) for _ in range(200)] + hf.all_special_ids:
        token = hf.convert_ids_to_tokens(token_id)
        assert ours.id_to_token(token_id) == token
        assert ours.token_to_id(token) == hf.convert_tokens_to_ids(token)


def test_token_bytes_concatenate_to_the_utf8_text(tokenizer_dir):
    ours = load_ours(tokenizer_dir)
    for text in FIXED_TEXTS + random_texts(4, 30):
        ids = ours.encode(text, add_special_tokens=False)
        assert b"".join(ours.token_bytes(i) for i in ids) == ours.decode(ids, skip_special_tokens=False).encode()


def test_tiny_chat_round_trips_any_unicode_text():
    ours = load_ours(TINY_CHAT_DIR)
    rng = random.Random(5)
    ranges = [(0x20, 0x7E), (0x0, 0x1F), (0xA0, 0x24F), (0x300, 0x36F), (0x4E00, 0x9FFF), (0x1F300, 0x1FAFF), (0x10000, 0x10FFFF)]
    for _ in range(100):
        chars = []
        for _ in range(rng.randint(1, 40)):
            lo, hi = rng.choice(ranges)
            c = rng.randint(lo, hi)
            chars.append(chr(c) if not 0xD800 <= c <= 0xDFFF else "x")
        text = "".join(chars)
        assert ours.decode(ours.encode(text)) == text


def test_eos_token_ids_add_generation_config_ids_after_the_tokenizer_eos():
    ours = load_ours(TINY_CHAT_DIR)
    with open(os.path.join(TINY_CHAT_DIR, "generation_config.json")) as f:
        generation_eos = json.load(f)["eos_token_id"]
    hf = load_hf(TINY_CHAT_DIR)
    assert ours.eos_token_ids[0] == hf.eos_token_id
    assert set(ours.eos_token_ids) == {hf.eos_token_id, *generation_eos}
    assert len(set(ours.eos_token_ids)) == len(ours.eos_token_ids)


def _edit_json(path, edit):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    edit(data)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)


def test_config_special_tokens_missing_from_tokenizer_json_are_added_like_transformers(tiny_chat_copy):
    vocab_size = load_ours(TINY_CHAT_DIR).vocab_size

    def edit(config):
        config["bos_token"] = {"__type": "AddedToken", "content": "<s>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
        config["additional_special_tokens"] = ["<tool_call>", "</tool_call>"]
        config["added_tokens_decoder"][str(vocab_size)] = {
            "content": "<think>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": False,
        }

    _edit_json(os.path.join(tiny_chat_copy, "tokenizer_config.json"), edit)
    ours, hf = Tokenizer.from_dir(tiny_chat_copy), load_hf(tiny_chat_copy)
    assert ours.vocab_size == len(hf)
    assert ours.all_special_ids == hf.all_special_ids
    assert ours.bos_token_id == hf.bos_token_id is not None
    text = "<s>Hi <think>plan</think><tool_call>{}</tool_call><|im_end|>"
    ids = ours.encode(text)
    assert ids == hf(text).input_ids
    for skip in (True, False):
        assert ours.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)


def test_tokenizer_json_post_processor_decides_added_bos_like_transformers(tiny_chat_copy):
    eot_id = load_ours(TINY_CHAT_DIR).token_to_id("<|endoftext|>")

    def add_bos(tok):
        tok["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [eot_id], "tokens": ["<|endoftext|>"]}},
        }

    def configure(config):
        config["bos_token"] = "<|endoftext|>"
        config["add_bos_token"] = False  # ignored by transformers 5 when tokenizer.json exists

    _edit_json(os.path.join(tiny_chat_copy, "tokenizer.json"), add_bos)
    _edit_json(os.path.join(tiny_chat_copy, "tokenizer_config.json"), configure)
    ours, hf = Tokenizer.from_dir(tiny_chat_copy), load_hf(tiny_chat_copy)
    for text in ("hello", ""):
        assert ours.encode(text) == hf(text).input_ids
        assert ours.encode(text, add_special_tokens=False) == hf(text, add_special_tokens=False).input_ids
    assert ours.add_bos_token and hf("hello").input_ids[0] == hf.bos_token_id


def test_legacy_special_tokens_map_is_read_like_transformers(tiny_chat_copy):
    def drop_added_tokens(config):
        del config["added_tokens_decoder"]

    _edit_json(os.path.join(tiny_chat_copy, "tokenizer_config.json"), drop_added_tokens)
    with open(os.path.join(tiny_chat_copy, "special_tokens_map.json"), "w", encoding="utf-8") as f:
        json.dump({"eos_token": {"content": "<|endoftext|>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}}, f)
    ours, hf = Tokenizer.from_dir(tiny_chat_copy), load_hf(tiny_chat_copy)
    assert (ours.eos_token, ours.eos_token_id) == (hf.eos_token, hf.eos_token_id) == ("<|endoftext|>", ours.token_to_id("<|endoftext|>"))
    assert ours.all_special_ids == hf.all_special_ids
