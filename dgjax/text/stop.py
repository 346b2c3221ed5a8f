"""Stop strings over streamed text.

Text arrives in arbitrary pieces (one token's worth, or less when the detokenizer held back part of
a character), so a stop string can straddle pieces. The matcher keeps back any tail of the stream
that could still grow into a stop string and releases it once it cannot; a stop string is therefore
never emitted (unless asked for) and never missed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class StopResult:
    """What one `feed` releases: `text` is safe to emit; `stop` is the matched stop string (or None)."""

    text: str
    stop: str | None = None


class StopStringMatcher:
    """Finds the first stop string in a text stream and cuts the output there.

    "First" is the occurrence that completes earliest in the stream (what a reader going character by
    character would see first); among those ending at the same character, the one starting earliest.
    After a match the matcher is finished and releases nothing more.
    """

    def __init__(self, stops: Sequence[str], include_stop_str_in_output: bool = False):
        self._stops = tuple(dict.fromkeys(s for s in stops if s))
        self._include = include_stop_str_in_output
        self._pending = ""  # received, not yet released: a possible start of a stop string
        self._max_len = max((len(s) for s in self._stops), default=0)
        self.stopped: str | None = None

    @property
    def finished(self) -> bool:
        return self.stopped is not None

    def feed(self, text: str) -> StopResult:
        if self.stopped is not None:
            return StopResult("")
        if not self._stops:
            return StopResult(text)
        buf = self._pending + text
        match = self._earliest_match(buf)
        if match is not None:
            start, stop = match
            self.stopped = stop
            self._pending = ""
            end = start + len(stop) if self._include else start
            return StopResult(buf[:end], stop)
        keep = self._partial_suffix_len(buf)
        self._pending = buf[len(buf) - keep :] if keep else ""
        return StopResult(buf[: len(buf) - keep])

    def flush(self) -> str:
        """At the end of the stream nothing can complete a stop string: release what was held."""
        if self.stopped is not None:
            return ""
        out, self._pending = self._pending, ""
        return out

    def _earliest_match(self, buf: str) -> tuple[int, str] | None:
        best: tuple[int, int, str] | None = None  # (end, start, stop)
        for stop in self._stops:
            start = buf.find(stop)
            if start < 0:
                continue
            candidate = (start + len(stop), start, stop)
            if best is None or candidate[:2] < best[:2]:
                best = candidate
        return None if best is None else (best[1], best[2])

    def _partial_suffix_len(self, buf: str) -> int:
        """Length of the longest tail of `buf` that is a proper prefix of some stop string."""
        for n in range(min(len(buf), self._max_len - 1), 0, -1):
            tail = buf[len(buf) - n :]
            if any(stop.startswith(tail) for stop in self._stops):
                return n
        return 0
