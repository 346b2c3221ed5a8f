"""Where things live by default: the embedded model served when no --model is given."""

from __future__ import annotations

import os

DEFAULT_MODEL_NAME = "tiny-chat"


def default_model_dir() -> str:
    """`checkpoints/tiny-chat` beside the package (a source checkout or an editable install)."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(os.path.dirname(here), "checkpoints", DEFAULT_MODEL_NAME)
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(
            f"the default model is not at {path}; pass --model DIR (an HF model folder) or run "
            "`python scripts/make_default_checkpoint.py`"
        )
    return path
