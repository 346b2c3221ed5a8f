"""An HF model folder's tokenizer, with transformers' encoding, decoding and chat-template semantics.

Built directly on the `tokenizers` library (no transformers at serving time). The loading rules
mirror `transformers` 5's `TokenizersBackend.from_pretrained`, so `encode` and `encode_chat`
produce the ids transformers would:
- `tokenizer.json` is authoritative; its post-processor decides what `add_special_tokens=True`
  adds (transformers 5 ignores `add_bos_token`/`add_eos_token` from the config when
  `tokenizer.json` exists, and so do we; `add_bos_token` below reports the effective behaviour).
- Added tokens listed in the config's `added_tokens_decoder` that `tokenizer.json` lacks, or has
  with other properties, are (re-)registered; named special tokens missing from the added
  vocabulary are added as special tokens.
- Chat templates: `chat_template.jinja` and `chat_templates/*.jinja` take priority over the
  config's `chat_template` (a string, or a list of `{name, template}`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import tokenizers
from tokenizers import AddedToken

from dgjax.text.chat_template import render_chat_template, select_chat_template

NAMED_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_ADDED_TOKEN_FIELDS = ("content", "single_word", "lstrip", "rstrip", "normalized", "special")


def _token_content(value: Any) -> str | None:
    """A special token from a config: a plain string or an AddedToken-style dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _as_added_token(value: Any, special: bool | None = None) -> AddedToken:
    if isinstance(value, str):
        return AddedToken(value, special=True if special is None else special, normalized=False)
    kwargs = {k: value[k] for k in _ADDED_TOKEN_FIELDS if k in value}
    if special is not None:
        kwargs["special"] = special
    return AddedToken(**kwargs)


def _same_added_token(a: AddedToken, b: AddedToken) -> bool:
    return all(getattr(a, f) == getattr(b, f) for f in _ADDED_TOKEN_FIELDS)


def _read_json(path: str) -> dict[str, Any]:
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table used by byte-level BPE vocabularies."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


_UNICODE_TO_BYTE = {c: b for b, c in _bytes_to_unicode().items()}


def _load_chat_templates(model_dir: str, config: Mapping[str, Any]) -> str | dict[str, str] | None:
    templates: dict[str, str] = {}
    default_file = os.path.join(model_dir, "chat_template.jinja")
    if os.path.exists(default_file):
        with open(default_file, encoding="utf-8") as f:
            templates["default"] = f.read()
    named_dir = os.path.join(model_dir, "chat_templates")
    if os.path.isdir(named_dir):
        for name in sorted(os.listdir(named_dir)):
            if name.endswith(".jinja"):
                with open(os.path.join(named_dir, name), encoding="utf-8") as f:
                    templates[name.removesuffix(".jinja")] = f.read()
    if templates:
        return templates["default"] if list(templates) == ["default"] else templates
    configured = config.get("chat_template")
    if isinstance(configured, list):
        return {t["name"]: t["template"] for t in configured}
    return configured


class Tokenizer:
    """Encode, decode and chat-format text for one model."""

    def __init__(
        self,
        backend: tokenizers.Tokenizer,
        config: Mapping[str, Any] | None = None,
        chat_template: str | Mapping[str, str] | None = None,
        generation_eos_token_ids: Sequence[int] = (),
    ):
        self._tok = backend
        config = dict(config or {})
        self._special_tokens_map = self._named_special_tokens(config)
        self._extra_special_tokens = self._extra_tokens(config)
        self._register_added_tokens(config)
        if config.get("split_special_tokens"):
            self._tok.encode_special_tokens = True
        self.chat_template = chat_template
        self._generation_eos_token_ids = tuple(generation_eos_token_ids)
        self._byte_level = self._has_byte_level_decoder()
        self._added_token_text = {i: t.content for i, t in self._tok.get_added_tokens_decoder().items()}
        bos = self.bos_token_id
        self._adds_bos = bos is not None and self._tok.encode("", add_special_tokens=True).ids[:1] == [bos]

    @classmethod
    def from_dir(cls, model_dir: str) -> "Tokenizer":
        """Load `tokenizer.json` (+ `tokenizer_config.json`, chat template files and the
        `eos_token_id` of `generation_config.json`) from an HF model folder."""
        backend = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        config = _read_json(os.path.join(model_dir, "tokenizer_config.json"))
        if "added_tokens_decoder" not in config:
            # Legacy checkpoints keep the named special tokens in special_tokens_map.json, which
            # then wins over the config (as in transformers).
            legacy = _read_json(os.path.join(model_dir, "special_tokens_map.json"))
            config = {**config, **{k: v for k, v in legacy.items() if v}}
        gen_eos = _read_json(os.path.join(model_dir, "generation_config.json")).get("eos_token_id")
        gen_eos_ids = [] if gen_eos is None else [gen_eos] if isinstance(gen_eos, int) else list(gen_eos)
        return cls(backend, config, _load_chat_templates(model_dir, config), gen_eos_ids)

    # ---- loading ----

    @staticmethod
    def _named_special_tokens(config: Mapping[str, Any]) -> dict[str, Any]:
        named = {k: config[k] for k in NAMED_SPECIAL_TOKENS if _token_content(config.get(k)) is not None}
        # transformers 5 also treats any other string-valued `*_token` key as a named special token.
        for key, value in config.items():
            if key.endswith("_token") and key not in named and isinstance(value, str):
                named[key] = value
        extra = config.get("extra_special_tokens")
        if isinstance(extra, Mapping):
            named.update({k: v for k, v in extra.items() if _token_content(v) is not None})
        return named

    @staticmethod
    def _extra_tokens(config: Mapping[str, Any]) -> list[Any]:
        extra = config.get("extra_special_tokens") or config.get("additional_special_tokens") or []
        if isinstance(extra, Mapping):
            return []
        return [t for t in extra if _token_content(t) is not None]

    def _register_added_tokens(self, config: Mapping[str, Any]) -> None:
        existing = self._tok.get_added_tokens_decoder()
        to_add: list[AddedToken] = []
        for idx, spec in sorted(config.get("added_tokens_decoder", {}).items(), key=lambda kv: int(kv[0])):
            token = _as_added_token(spec, special=spec.get("special", False))
            current = existing.get(int(idx))
            if current is None or not _same_added_token(current, token):
                to_add.append(token)
        known = {t.content for t in existing.values()} | {t.content for t in to_add}
        for value in [*self._special_tokens_map.values(), *self._extra_special_tokens]:
            content = _token_content(value)
            if content not in known:
                to_add.append(_as_added_token(value, special=True))
                known.add(content)
        if to_add:
            self._tok.add_tokens(to_add)

    def _has_byte_level_decoder(self) -> bool:
        if self._tok.decoder is None:
            return False
        decoder = json.loads(self._tok.decoder.__getstate__())
        parts = decoder.get("decoders", [decoder]) if decoder.get("type") == "Sequence" else [decoder]
        return any(p.get("type") == "ByteLevel" for p in parts)

    # ---- vocabulary ----

    @property
    def backend(self) -> tokenizers.Tokenizer:
        """The underlying `tokenizers.Tokenizer` (read-only use)."""
        return self._tok

    @property
    def vocab_size(self) -> int:
        """Number of token ids including added tokens (transformers' `len(tokenizer)`)."""
        return self._tok.get_vocab_size(with_added_tokens=True)

    def id_to_token(self, token_id: int) -> str | None:
        return self._tok.id_to_token(token_id)

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def token_bytes(self, token_id: int) -> bytes:
        """The exact bytes a token stands for (OpenAI logprobs' `bytes`); a byte-level token
        may be a fragment of a UTF-8 character, which `decode([id])` cannot show."""
        added = self._added_token_text.get(token_id)
        if added is not None:
            return added.encode("utf-8")
        piece = self._tok.id_to_token(token_id)
        if piece is None:
            raise KeyError(f"token id {token_id} is outside the vocabulary")
        if self._byte_level and all(c in _UNICODE_TO_BYTE for c in piece):
            return bytes(_UNICODE_TO_BYTE[c] for c in piece)
        return self._tok.decode([token_id], skip_special_tokens=False).encode("utf-8")

    # ---- special tokens ----

    @property
    def special_tokens_map(self) -> dict[str, str]:
        """Named special tokens as strings; chat templates see these as variables."""
        return {k: _token_content(v) for k, v in self._special_tokens_map.items()}

    @property
    def all_special_tokens(self) -> list[str]:
        """Named special tokens, then the extra ones (transformers' definition and order)."""
        out: list[str] = []
        for value in [*(self._special_tokens_map.get(k) for k in NAMED_SPECIAL_TOKENS), *self._named_custom()]:
            content = _token_content(value)
            if content is not None and content not in out:
                out.append(content)
        for value in self._extra_special_tokens:
            content = _token_content(value)
            if content not in out:
                out.append(content)
        return out

    def _named_custom(self) -> list[Any]:
        return [v for k, v in self._special_tokens_map.items() if k not in NAMED_SPECIAL_TOKENS]

    @property
    def all_special_ids(self) -> list[int]:
        return [i for i in map(self._tok.token_to_id, self.all_special_tokens) if i is not None]

    def _named_id(self, name: str) -> int | None:
        content = _token_content(self._special_tokens_map.get(name))
        return None if content is None else self._tok.token_to_id(content)

    @property
    def bos_token(self) -> str | None:
        return _token_content(self._special_tokens_map.get("bos_token"))

    @property
    def bos_token_id(self) -> int | None:
        return self._named_id("bos_token")

    @property
    def eos_token(self) -> str | None:
        return _token_content(self._special_tokens_map.get("eos_token"))

    @property
    def eos_token_id(self) -> int | None:
        return self._named_id("eos_token")

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """Every id that ends generation: the tokenizer's eos plus generation_config's eos ids."""
        ids = [] if self.eos_token_id is None else [self.eos_token_id]
        ids += [i for i in self._generation_eos_token_ids if i not in ids]
        return tuple(ids)

    @property
    def pad_token_id(self) -> int | None:
        return self._named_id("pad_token")

    @property
    def add_bos_token(self) -> bool:
        """Whether `encode(text)` (add_special_tokens=True) starts with the bos token."""
        return self._adds_bos

    # ---- text ----

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    # ---- chat ----

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        chat_template: str | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        continue_final_message: bool = False,
        **template_kwargs: Any,
    ) -> str:
        """Render the conversation as the model's prompt text.

        `chat_template` is a template's text or, for checkpoints with several, its name;
        `template_kwargs` reach the template as variables (e.g. `enable_thinking=False`).
        Raises `ChatTemplateError` (a ValueError) when the template rejects the input.
        """
        template = select_chat_template(self.chat_template, chat_template, has_tools=tools is not None)
        return render_chat_template(
            template,
            messages,
            add_generation_prompt=add_generation_prompt,
            tools=tools,
            documents=documents,
            continue_final_message=continue_final_message,
            special_tokens=self.special_tokens_map,
            **template_kwargs,
        )

    def encode_chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> list[int]:
        """Prompt token ids for a conversation: the rendered text encoded without adding special
        tokens (the template writes its own bos), as transformers' `apply_chat_template` does."""
        text = self.apply_chat_template(messages, add_generation_prompt, tools, **kwargs)
        return self.encode(text, add_special_tokens=False)
