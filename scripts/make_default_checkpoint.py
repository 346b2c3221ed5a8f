"""Write checkpoints/tiny-chat: the small default model dgjax serves out of the box.

An HF-format LlamaForCausalLM (bf16 safetensors) with a ChatML chat template and a byte-level BPE
tokenizer trained here, so the repository needs no download to run end to end. Everything comes
from text shipped with CPython (`pydoc_data.topics`: the language reference's help topics) and fixed
seeds, so a rerun on the same machine and package versions writes identical files. By default the
random init is then trained for a few CPU minutes on that text and on chat-formatted questions and
answers made from it: the weights stay meaningless, but the model emits word-like text and learns
to end its turn with <|im_end|>, which makes the demo and the stop-token paths real.

Usage: python scripts/make_default_checkpoint.py [--out DIR] [--train-steps N]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import time

import pydoc_data.topics
import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO_ROOT, "checkpoints", "tiny-chat")

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)
# 2048 ids (the last three special) keep the untied embedding and lm_head at 1 M parameters
# together, which with two layers leaves the whole folder under the 6 MB commit budget.
VOCAB_SIZE = 2048
# Qwen2's pre-tokenizer split: letters, single digits, punctuation runs, newlines, spaces.
PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
SEED = 0
SEQ_LEN = 256
BATCH = 16

CHAT_TEMPLATE = """\
{%- macro render_content(content) -%}
    {%- if content is string -%}
        {{- content -}}
    {%- elif content is iterable and content is not mapping -%}
        {%- for part in content -%}
            {%- if part is mapping and part.type == 'text' -%}
                {{- part.text -}}
            {%- endif -%}
        {%- endfor -%}
    {%- elif content is defined and content is not none -%}
        {{- content | string -}}
    {%- endif -%}
{%- endmacro -%}
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- render_content(messages[0].content) + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + render_content(messages[0].content) + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'system' %}
        {%- if not loop.first %}
            {{- raise_exception('System messages are only allowed at the beginning of the conversation.') }}
        {%- endif %}
    {%- elif message.role == 'user' %}
        {{- '<|im_start|>user\\n' + render_content(message.content) + '<|im_end|>\\n' }}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant\\n' + render_content(message.content) }}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if not loop.first or render_content(message.content) %}
                    {{- '\\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' + render_content(message.content) + '\\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- else %}
        {{- raise_exception('Unknown message role: ' + message.role) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""


# ---- corpus ----


def _paragraphs(topic_text: str) -> list[str]:
    """Prose paragraphs of a help topic, hard line wraps undone; code blocks and headings dropped."""
    out = []
    for block in re.split(r"\n\s*\n", topic_text):
        lines = block.split("\n")
        if not block.strip() or lines[0].startswith(" ") or re.fullmatch(r"[*=\-]+", lines[-1].strip()):
            continue
        out.append(" ".join(line.strip() for line in lines))
    return out


def _answer(paragraphs: list[str], limit: int = 500) -> str:
    text = ""
    for p in paragraphs:
        if text and len(text) + len(p) > limit:
            break
        text = f"{text}\n\n{p}" if text else p
    return text


def build_corpus() -> tuple[list[str], list[str]]:
    """(documents, chat transcripts), in a fixed order."""
    topics = pydoc_data.topics.topics
    documents = ["\n\n".join(_paragraphs(topics[k])) for k in sorted(topics)]
    questions = ("What is {}?", "Explain {} in Python.", "Tell me about {}.", "How does {} work?")
    chats = []
    for i, key in enumerate(sorted(topics)):
        paras = _paragraphs(topics[key])
        if not paras:
            continue
        name = key.replace("-", " ")
        for j, question in enumerate(questions):
            start = j % len(paras)
            system = f"{IM_START}system\nYou are a helpful assistant.{IM_END}\n" if (i + j) % 2 else ""
            chats.append(
                f"{system}{IM_START}user\n{question.format(name)}{IM_END}\n"
                f"{IM_START}assistant\n{_answer(paras[start:])}{IM_END}\n"
            )
    return documents, chats


# ---- tokenizer ----


def train_tokenizer(documents: list[str]) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    # No normalizer, byte-level everything: any UTF-8 text round-trips exactly.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(SPECIAL_TOKENS),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(documents, trainer=trainer)
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    if tokenizer.get_vocab_size() != VOCAB_SIZE:
        raise RuntimeError(f"tokenizer has {tokenizer.get_vocab_size()} ids, expected {VOCAB_SIZE}")
    return tokenizer


def tokenizer_config(tokenizer: Tokenizer) -> dict:
    added = {
        str(tokenizer.token_to_id(t)): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for t in SPECIAL_TOKENS
    }
    return {
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": [IM_START, IM_END],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": IM_END,
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": ENDOFTEXT,
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }


# ---- model ----


def model_config(tokenizer: Tokenizer) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.token_to_id(ENDOFTEXT),
        eos_token_id=[tokenizer.token_to_id(IM_END), tokenizer.token_to_id(ENDOFTEXT)],
        pad_token_id=tokenizer.token_to_id(ENDOFTEXT),
        dtype="bfloat16",
    )


def training_stream(tokenizer: Tokenizer, documents: list[str], chats: list[str]) -> torch.Tensor:
    eot = tokenizer.token_to_id(ENDOFTEXT)
    ids: list[int] = []
    for text in [*documents, *chats]:
        ids += tokenizer.encode(text, add_special_tokens=False).ids + [eot]
    return torch.tensor(ids, dtype=torch.long)


def train(model: LlamaForCausalLM, stream: torch.Tensor, steps: int) -> None:
    """A short, seeded AdamW run; single-threaded so that the result does not depend on core count."""
    if steps <= 0:
        return
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(SEED)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.01)
    warmup = max(1, steps // 20)
    model.train()
    started = time.time()
    for step in range(steps):
        lr_scale = (step + 1) / warmup if step < warmup else 0.5 * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup)))
        for group in optimizer.param_groups:
            group["lr"] = 3e-3 * max(lr_scale, 0.05)
        starts = torch.randint(0, len(stream) - SEQ_LEN - 1, (BATCH,), generator=generator)
        batch = torch.stack([stream[s : s + SEQ_LEN] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {loss.item():.3f}  {time.time() - started:.0f}s", flush=True)
    model.eval()


def write_checkpoint(out_dir: str, train_steps: int) -> None:
    documents, chats = build_corpus()
    tokenizer = train_tokenizer(documents)
    config = model_config(tokenizer)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    model = LlamaForCausalLM(config).to(torch.float32)
    train(model, training_stream(tokenizer, documents, chats), train_steps)

    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    model.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)
    _add_top_level_rope_theta(os.path.join(out_dir, "config.json"), config)
    GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        do_sample=True,
        temperature=0.7,
        top_p=0.9,
    ).save_pretrained(out_dir)
    tokenizer.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(tokenizer), f, indent=2, ensure_ascii=False, sort_keys=True)
        f.write("\n")


def _add_top_level_rope_theta(path: str, config: LlamaConfig) -> None:
    """transformers 5 writes only `rope_parameters`; readers of the older layout look for `rope_theta`."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data["rope_theta"] = config.rope_parameters["rope_theta"]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--train-steps", type=int, default=300)
    args = parser.parse_args()
    write_checkpoint(args.out, args.train_steps)
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(f"wrote {args.out} ({size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
