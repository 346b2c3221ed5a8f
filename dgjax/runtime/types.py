"""Plain data that crosses the boundary between the engine and its callers (server, offline API)."""

from __future__ import annotations

import dataclasses
import enum


class FinishReason(str, enum.Enum):
    STOP = "stop"  # EOS, a stop token id or a stop string
    LENGTH = "length"  # max_tokens or the context limit
    ABORT = "abort"  # cancelled (client went away) or the engine shut down


MAX_TOP_LOGPROBS = 20  # OpenAI's limit; the sampler always computes this many when asked


@dataclasses.dataclass
class SamplingParams:
    """Per-request sampling and stopping parameters (vLLM's names and defaults)."""

    max_tokens: int | None = None  # None: run to EOS or the context limit
    temperature: float = 1.0  # 0: greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: disabled
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: dict[int, float] = dataclasses.field(default_factory=dict)
    seed: int | None = None
    stop: list[str] = dataclasses.field(default_factory=list)
    stop_token_ids: list[int] = dataclasses.field(default_factory=list)
    ignore_eos: bool = False
    logprobs: int | None = None  # None: none; 0: the sampled token's; k: plus top-k
    prompt_logprobs: int | None = None  # as logprobs, for every prompt token (echo)
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    # Structured output: an llguidance grammar (Lark, or its JSON form; see dgjax.structured) the
    # generated tokens must follow. None: unconstrained. The request ends when the grammar does.
    grammar: str | None = None

    def needs_penalties(self) -> bool:
        return (
            self.repetition_penalty != 1.0
            or self.presence_penalty != 0.0
            or self.frequency_penalty != 0.0
        )


@dataclasses.dataclass
class TokenLogprob:
    """One position's logprob record: the chosen token and, if asked, the top alternatives."""

    token_id: int
    logprob: float
    top: list[tuple[int, float]] = dataclasses.field(default_factory=list)  # (token_id, logprob)


@dataclasses.dataclass
class GenerationRequest:
    request_id: str
    prompt_token_ids: list[int]
    params: SamplingParams
    cache_salt: str | None = None  # prefix-cache pages are shared only within one salt (vLLM)


@dataclasses.dataclass
class RequestOutput:
    """An incremental update for one request; the last one has `finished=True`.

    `text` and `token_ids` are deltas since the previous update. Stop strings are already cut out of
    `text` (held back until it is certain they do not start a stop string).
    """

    request_id: str
    token_ids: list[int]
    text: str
    logprobs: list[TokenLogprob] | None = None
    finished: bool = False
    finish_reason: FinishReason | None = None
    stop_reason: str | int | None = None  # the stop string or stop token id that ended it
    num_prompt_tokens: int = 0
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache
    num_generated_tokens: int = 0  # total so far
    prompt_logprobs: list[TokenLogprob | None] | None = None  # first update only, when asked
    error: str | None = None
