"""A real checkpoint whose output is a fixed script of text pieces, for testing what the server
makes of model text (tool calls, reasoning) through the real engine, sampler and detokenizer.

It is tiny-chat's Llama with its tokenizer plus one added token per script piece. The weights make
the model a lookup table: attention and MLP write nothing back (o_proj = down_proj = 0), so the last
position's hidden state is its own token's embedding, a one-hot "slot"; lm_head sends a piece's slot
to the next piece's token (the last piece to <|im_end|>), and slot 0, shared by every ordinary
token, to the first piece of every script with the same logit: the request's `logit_bias` on a
script's first token picks the script. Pieces may split markup anywhere (`<tool` | `_call>`), which
is how real tokenizers cut it.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import tokenizers

from dgjax.checkpoint.safetensors_io import SafetensorsFile, write_safetensors

TINY_CHAT_VOCAB = 2048
IM_END_ID = 2047
SCALE = 4.0  # logit of the scripted next token after the final norm: 16 * SCALE vs 0 elsewhere


def cut_script(text: str, lengths: tuple[int, ...], taken: set[str]) -> list[str]:
    """`text` in pieces of the given cycling lengths, each grown until it is new: a piece must
    not be a token the base tokenizer has (it would keep that id) nor repeat another piece."""
    out, i, k = [], 0, 0
    while i < len(text):
        n = lengths[k % len(lengths)]
        while i + n < len(text) and text[i:i + n] in taken:
            n += 1
        piece = text[i:i + n]
        if piece in taken:
            raise ValueError(f"cannot cut {text!r} into new pieces")
        taken.add(piece)
        out.append(piece)
        i, k = i + n, k + 1
    return out


def write_scripted_checkpoint(base_dir: str, out_dir: str, scripts: dict[str, str],
                              chat_template: str, lengths: tuple[int, ...] = (7, 3, 11, 5, 13, 2)
                              ) -> dict[str, tuple[list[int], list[str]]]:
    """Write the checkpoint; returns each script's (token ids, pieces): bias the first id to pick
    the script."""
    tokenizer = json.load(open(os.path.join(base_dir, "tokenizer.json"), encoding="utf-8"))
    taken = set(tokenizer["model"]["vocab"]) | {t["content"] for t in tokenizer["added_tokens"]}
    cut = {name: cut_script(text, lengths, taken) for name, text in scripts.items()}
    pieces = [p for script in cut.values() for p in script]
    config = json.load(open(os.path.join(base_dir, "config.json")))
    hidden = config["hidden_size"]
    if len(pieces) + 1 > hidden:
        raise ValueError("more pieces than one-hot slots")
    vocab = -(-(TINY_CHAT_VOCAB + len(pieces)) // 64) * 64
    ids, token_ids = {}, TINY_CHAT_VOCAB
    for name, script in cut.items():
        ids[name] = list(range(token_ids, token_ids + len(script)))
        token_ids += len(script)

    embed = np.zeros((vocab, hidden), np.float32)
    embed[:, 0] = 1.0
    lm_head = np.zeros((vocab, hidden), np.float32)
    slot = 1
    for name, script_ids in ids.items():
        lm_head[script_ids[0], 0] = SCALE
        for k, token in enumerate(script_ids):
            embed[token] = 0.0
            embed[token, slot] = 1.0
            successor = script_ids[k + 1] if k + 1 < len(script_ids) else IM_END_ID
            lm_head[successor, slot] = SCALE
            slot += 1

    base = SafetensorsFile(os.path.join(base_dir, "model.safetensors"))
    tensors = {}
    for key in base.keys():
        shape = base.shape(key)
        if key == "model.embed_tokens.weight":
            tensors[key] = embed
        elif key == "lm_head.weight":
            tensors[key] = lm_head
        elif key.endswith("norm.weight"):
            tensors[key] = np.ones(shape, np.float32)
        elif key.endswith(("o_proj.weight", "down_proj.weight")):
            tensors[key] = np.zeros(shape, np.float32)
        else:  # q/k/v, gate/up: anything; their results are multiplied by zero
            tensors[key] = np.asarray(base.tensor(key), np.float32)
    os.makedirs(out_dir, exist_ok=True)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)

    config.update(vocab_size=vocab, dtype="float32")
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    shutil.copy(os.path.join(base_dir, "generation_config.json"), out_dir)

    for name, script in cut.items():
        for token, piece in zip(ids[name], script):
            tokenizer["added_tokens"].append(
                {"id": token, "content": piece, "single_word": False, "lstrip": False,
                 "rstrip": False, "normalized": False, "special": False})
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    written = tokenizers.Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
    for name, script in cut.items():
        assert [written.decode([i], skip_special_tokens=False) for i in ids[name]] == script
    tok_config = json.load(open(os.path.join(base_dir, "tokenizer_config.json"), encoding="utf-8"))
    tok_config["chat_template"] = chat_template
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tok_config, f, ensure_ascii=False)
    return {name: (ids[name], cut[name]) for name in cut}
