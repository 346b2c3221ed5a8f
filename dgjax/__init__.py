"""dgjax: a JAX/XLA-compiled LLM inference engine with an OpenAI-compatible server."""

from dgjax import xla_flags

xla_flags.apply()  # before anything imports jax and creates a backend

from dgjax.runtime.types import SamplingParams  # noqa: E402

__all__ = ["LLM", "SamplingParams"]


def __getattr__(name):
    if name == "LLM":  # imported lazily: it pulls in jax and the whole runtime
        from dgjax.llm import LLM

        return LLM
    raise AttributeError(name)
