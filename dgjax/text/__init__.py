"""Text in and out of the model: tokenizer, chat templates, streaming detokenization, stop strings."""

from dgjax.text.chat_template import ChatTemplateError
from dgjax.text.detokenizer import IncrementalDetokenizer
from dgjax.text.stop import StopResult, StopStringMatcher
from dgjax.text.stream import TextStream
from dgjax.text.tokenizer import Tokenizer

__all__ = [
    "ChatTemplateError",
    "IncrementalDetokenizer",
    "StopResult",
    "StopStringMatcher",
    "TextStream",
    "Tokenizer",
]
