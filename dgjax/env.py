"""Integer switches read from the environment (kernel launch knobs, engine probes), checked the same way
everywhere: a bad value is refused with the variable's name. No jax import, so `dgjax.config` can use it."""

from __future__ import annotations

import os


def env_count(env_var: str, default: int | None, what: str, minimum: int = 0,
              power_of_two: bool = False) -> int | None:
    """$env_var (read when called: trace time for kernel apis) as an int >= `minimum` (and a power of two if
    asked), else `default`."""
    raw = os.environ.get(env_var, "").strip()
    if not raw:
        return default
    kind = "a power of two" if power_of_two else "an integer"
    if not raw.isdigit() or int(raw) < minimum or (power_of_two and int(raw) & (int(raw) - 1)):
        raise ValueError(f"{env_var} must be {what} ({kind} >= {minimum}), got {raw!r}")
    return int(raw)
