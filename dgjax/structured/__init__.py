"""Structured output with llguidance: grammars built from JSON schemas and tool definitions, and
the per-model backend that turns a grammar into per-request matchers and token bitmasks.

- json_schema: schema -> grammar, OpenAI strict / non-strict meanings, errors with schema paths
- tool_formats / tool_grammar: tool calls in each model family's format (forced or lazy)
- reasoning: let reasoning models think before a constrained answer
- backend: the engine's GrammarBackend (token trie, compiled-grammar cache, masks)

The engine applies the masks on the device (runtime.sampler.apply_token_bitmask); the server turns
request fields into grammars (serving.structured).
"""
