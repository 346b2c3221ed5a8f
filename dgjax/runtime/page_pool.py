"""Host-side bookkeeping of the paged KV pool: which pages each sequence holds, admission by
reservation, and the prefix cache.

Admission reserves every page a sequence could ever need (prompt + max new tokens), so a running
sequence never runs out of pages and nothing is preempted; pages are assigned lazily as it grows.

The prefix cache shares full pages between sequences. A full page is keyed by a chain hash of its
whole token prefix, and each cache entry also keeps its own tokens and a link to its parent entry:
a lookup accepts an entry only when both match, so even a forced hash collision cannot produce a
wrong match. Removing an entry removes its descendants too, which keeps every cached entry reachable
from the root and makes the parent link exact. Unreferenced cached pages stay cached until
allocation needs them: never-cached free pages go first, then the least recently used cached page.

Page 0 is the trash page that padded writes land on; it is never handed out. Not thread-safe: the
engine loop is its only user.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import math
from collections.abc import Hashable, Sequence

import numpy as np

TRASH_PAGE = 0
DEFAULT_DIGEST_SIZE = 32  # bytes of blake2b; 256 bits make an accidental collision negligible


class AdmissionError(RuntimeError):
    """The pool cannot reserve the pages a sequence asks for (check `can_admit` first)."""


class ReservationExceeded(RuntimeError):
    """A sequence grew beyond the tokens it reserved: a bug in the caller."""


def chain_hash(parent: bytes | None, tokens: Sequence[int],
               digest_size: int = DEFAULT_DIGEST_SIZE) -> bytes:
    """Digest of a page's whole prefix: the parent page's digest (None: first page) + its tokens."""
    h = hashlib.blake2b(bytes(digest_size) if parent is None else parent, digest_size=digest_size)
    h.update(np.asarray(tokens, dtype=np.int64).tobytes())
    return h.digest()


def salt_root(salt: str | None, digest_size: int = DEFAULT_DIGEST_SIZE) -> bytes | None:
    """The chain root for a salted request (vLLM `cache_salt`): prefixes are shared only between
    requests with the same salt. None: unsalted (the zero root)."""
    if salt is None:
        return None
    return hashlib.blake2b(b"cache_salt\0" + salt.encode(), digest_size=digest_size).digest()


@dataclasses.dataclass(eq=False)
class _CacheEntry:
    page: int
    digest: bytes
    tokens: tuple[int, ...]
    parent: _CacheEntry | None  # None: the first page of a prompt
    root: bytes | None = None  # the salt root a first page was hashed from (checked on match)
    children: set[_CacheEntry] = dataclasses.field(default_factory=set)
    alive: bool = True


@dataclasses.dataclass(eq=False)
class _Sequence:
    pages: list[int]
    max_pages: int
    num_cached_tokens: int
    num_hashed_pages: int  # leading full pages already offered to the cache
    last_digest: bytes | None  # chain digest of the last hashed page (None: none hashed yet)
    last_entry: _CacheEntry | None  # cache entry holding that page's content
    root: bytes | None = None  # salt root of its chain (see salt_root)
    hashing_stopped: bool = False  # its chain left the cache: no later page can be registered


class PagePool:
    """Page allocation, reservation-based admission and refcounted prefix caching."""

    def __init__(self, num_pages: int, page_size: int, enable_prefix_cache: bool = True,
                 digest_size: int = DEFAULT_DIGEST_SIZE):
        if num_pages < 2:
            raise ValueError(f"num_pages must be >= 2 (page 0 is the trash page), got {num_pages}")
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        self.num_pages = num_pages
        self.page_size = page_size
        self.digest_size = digest_size  # tests shrink it to force collisions
        self._enabled = enable_prefix_cache
        self._refcount = [0] * num_pages
        self._free: collections.deque[int] = collections.deque(range(1, num_pages))
        self._evictable: collections.OrderedDict[int, None] = collections.OrderedDict()  # LRU first
        self._entries: dict[bytes, _CacheEntry] = {}
        self._page_entry: dict[int, _CacheEntry] = {}
        self._seqs: dict[Hashable, _Sequence] = {}
        self._outstanding = 0  # reserved pages not yet assigned, summed over sequences
        self._queries_tokens = 0
        self._hit_tokens = 0

    # ---- admission ---------------------------------------------------------------------------
    def can_admit(self, max_total_tokens: int, prompt_token_ids: Sequence[int] = (),
                  *, use_prefix_cache: bool = True, salt: str | None = None) -> bool:
        """Would `reserve` succeed now? Without a prompt it ignores the cache (never optimistic)."""
        matched = self._match(prompt_token_ids, self._root(salt)) if use_prefix_cache else []
        return self._fits(self._pages_for(max_total_tokens), matched)

    def reserve(self, seq_id: Hashable, prompt_token_ids: Sequence[int], max_total_tokens: int,
                *, use_prefix_cache: bool = True, salt: str | None = None) -> int:
        """Reserve pages for `max_total_tokens`, starting from the cached prefix of the prompt.

        Returns the number of prompt tokens whose KV is already cached (a page multiple, always
        less than the prompt length). Raises AdmissionError when it does not fit.
        """
        if not self.try_reserve(seq_id, prompt_token_ids, max_total_tokens,
                                use_prefix_cache=use_prefix_cache, salt=salt):
            raise AdmissionError(
                f"{seq_id!r} needs {self._pages_for(max_total_tokens)} pages, "
                f"{self.num_available_pages} available")
        return self._seqs[seq_id].num_cached_tokens

    def try_reserve(self, seq_id: Hashable, prompt_token_ids: Sequence[int],
                    max_total_tokens: int, *, use_prefix_cache: bool = True,
                    salt: str | None = None) -> bool:
        """As `reserve`, but returns False instead of raising when it does not fit.

        `salt` (vLLM's `cache_salt`) confines prefix sharing to requests with the same salt."""
        if seq_id in self._seqs:
            raise ValueError(f"sequence {seq_id!r} already holds a reservation")
        if max_total_tokens < len(prompt_token_ids):
            raise ValueError(f"max_total_tokens {max_total_tokens} is shorter than the prompt "
                             f"({len(prompt_token_ids)} tokens)")
        use_cache = use_prefix_cache and self._enabled
        root = self._root(salt)
        matched = self._match(prompt_token_ids, root) if use_cache else []
        max_pages = self._pages_for(max_total_tokens)
        if not self._fits(max_pages, matched):
            return False
        for entry in matched:
            if self._refcount[entry.page] == 0:
                del self._evictable[entry.page]
            self._refcount[entry.page] += 1
        last = matched[-1] if matched else None
        num_cached = len(matched) * self.page_size
        self._seqs[seq_id] = _Sequence(
            pages=[e.page for e in matched], max_pages=max_pages, num_cached_tokens=num_cached,
            num_hashed_pages=len(matched), last_digest=last.digest if last else root,
            last_entry=last, root=root)
        self._outstanding += max_pages - len(matched)
        if use_cache:
            self._queries_tokens += len(prompt_token_ids)
            self._hit_tokens += num_cached
        return True

    def _pages_for(self, num_tokens: int) -> int:
        return math.ceil(num_tokens / self.page_size)

    def _fits(self, max_pages: int, matched: list[_CacheEntry]) -> bool:
        # Matched pages need no new page, but an unreferenced one stops being evictable.
        revived = sum(1 for e in matched if self._refcount[e.page] == 0)
        return max_pages - len(matched) <= self.num_available_pages - revived

    # ---- growth and release ------------------------------------------------------------------
    def ensure_capacity(self, seq_id: Hashable, num_tokens: int) -> list[int]:
        """Assign pages until the sequence holds `num_tokens`; returns the newly assigned pages."""
        seq = self._seqs[seq_id]
        needed = self._pages_for(num_tokens)
        if needed > seq.max_pages:
            raise ReservationExceeded(
                f"{seq_id!r} needs {needed} pages for {num_tokens} tokens but reserved "
                f"{seq.max_pages}")
        new = []
        while len(seq.pages) < needed:
            page = self._take_page()
            self._refcount[page] = 1
            seq.pages.append(page)
            new.append(page)
            self._outstanding -= 1
        return new

    def _take_page(self) -> int:
        if self._free:
            return self._free.popleft()
        # Admission guarantees a page exists: the reservation being drawn on counted it.
        page, _ = self._evictable.popitem(last=False)
        self._drop_entry(self._page_entry[page])
        return page

    def free(self, seq_id: Hashable) -> None:
        """Release a finished or cancelled sequence: its pages and its unused reservation."""
        seq = self._seqs.pop(seq_id)
        self._outstanding -= seq.max_pages - len(seq.pages)
        # Last page first, so a chain's tail is older in the LRU than its head and evicted first:
        # a shorter prefix is shared by more prompts.
        for page in reversed(seq.pages):
            self._refcount[page] -= 1
            if self._refcount[page] == 0:
                if page in self._page_entry:
                    self._evictable[page] = None
                else:
                    self._free.append(page)

    # ---- prefix cache ------------------------------------------------------------------------
    def _root(self, salt: str | None) -> bytes | None:
        return salt_root(salt, self.digest_size)

    def match_prefix(self, token_ids: Sequence[int], salt: str | None = None
                     ) -> tuple[int, list[int]]:
        """The longest cached chain of full pages that prefixes `token_ids`: (tokens, pages).

        Never covers the whole prompt (at most the largest page multiple below its length), so the
        model always computes at least one token and yields its logits. Changes no state.
        """
        matched = self._match(token_ids, self._root(salt))
        return len(matched) * self.page_size, [e.page for e in matched]

    def _match(self, token_ids: Sequence[int], root: bytes | None) -> list[_CacheEntry]:
        if not self._enabled or not token_ids:
            return []
        ps = self.page_size
        matched: list[_CacheEntry] = []
        digest = root
        parent = None
        for i in range((len(token_ids) - 1) // ps):
            tokens = tuple(int(t) for t in token_ids[i * ps:(i + 1) * ps])
            digest = chain_hash(digest, tokens, self.digest_size)
            entry = self._entries.get(digest)
            if (entry is None or entry.parent is not parent or entry.tokens != tokens
                    or (parent is None and entry.root != root)):
                break
            matched.append(entry)
            parent = entry
        return matched

    def register_full_pages(self, seq_id: Hashable, token_ids: Sequence[int]) -> None:
        """Offer the sequence's newly full pages to the cache.

        `token_ids` are the sequence's first N tokens, all of whose KV has been written (or
        dispatched, in device order). A page whose prefix is already cached in another page stays
        private; the existing one keeps serving matches.
        """
        seq = self._seqs[seq_id]
        ps = self.page_size
        num_full = len(token_ids) // ps
        if num_full > len(seq.pages):
            raise ValueError(f"{seq_id!r}: {len(token_ids)} tokens written but only "
                             f"{len(seq.pages)} pages assigned")
        if not self._enabled:
            return
        for i in range(seq.num_hashed_pages, num_full):
            if seq.hashing_stopped:
                return
            parent = seq.last_entry
            if i > 0 and (parent is None or not parent.alive):
                seq.hashing_stopped = True  # its parent left the cache; so can no descendant
                return
            tokens = tuple(int(t) for t in token_ids[i * ps:(i + 1) * ps])
            digest = chain_hash(seq.last_digest, tokens, self.digest_size)
            entry = self._entries.get(digest)
            if entry is None:
                entry = _CacheEntry(seq.pages[i], digest, tokens, parent,
                                    root=seq.root if parent is None else None)
                self._entries[digest] = entry
                self._page_entry[entry.page] = entry
                if parent is not None:
                    parent.children.add(entry)
            elif (entry.parent is not parent or entry.tokens != tokens
                  or (parent is None and entry.root != seq.root)):
                seq.hashing_stopped = True  # a true hash collision: leave this chain private
                return
            seq.num_hashed_pages = i + 1
            seq.last_digest = digest
            seq.last_entry = entry

    def _drop_entry(self, root: _CacheEntry) -> None:
        """Uncache an entry and all its descendants; their unreferenced pages become free."""
        if root.parent is not None:
            root.parent.children.discard(root)
        stack = [root]
        while stack:
            entry = stack.pop()
            stack.extend(entry.children)
            entry.children = set()
            entry.alive = False
            del self._entries[entry.digest]
            del self._page_entry[entry.page]
            if entry.page in self._evictable:
                del self._evictable[entry.page]
                self._free.append(entry.page)

    def clear_prefix_cache(self) -> None:
        """Forget every cached prefix (e.g. after the weights change); pages in use stay in use."""
        for entry in self._entries.values():
            entry.alive = False
            entry.children = set()
        self._entries.clear()
        self._page_entry.clear()
        self._free.extend(self._evictable)
        self._evictable.clear()

    def set_enabled(self, enabled: bool) -> None:
        """Turn prefix caching on or off; turning it off forgets the cache."""
        if not enabled:
            self.clear_prefix_cache()
        self._enabled = enabled

    @property
    def enabled(self) -> bool:
        return self._enabled

    # ---- queries -----------------------------------------------------------------------------
    def block_table(self, seq_id: Hashable) -> list[int]:
        return list(self._seqs[seq_id].pages)

    def num_cached_tokens(self, seq_id: Hashable) -> int:
        """Prompt tokens of this sequence whose KV came from the prefix cache."""
        return self._seqs[seq_id].num_cached_tokens

    def __contains__(self, seq_id: Hashable) -> bool:
        return seq_id in self._seqs

    def refcount(self, page: int) -> int:
        return self._refcount[page]

    def is_cached(self, page: int) -> bool:
        """Whether the page currently serves prefix-cache matches (referenced or not)."""
        return page in self._page_entry

    # ---- counters for metrics ----------------------------------------------------------------
    @property
    def num_sequences(self) -> int:
        return len(self._seqs)

    @property
    def num_usable_pages(self) -> int:
        return self.num_pages - 1

    @property
    def num_free_pages(self) -> int:
        """Unreferenced pages that hold no cached prefix."""
        return len(self._free)

    @property
    def num_cached_pages(self) -> int:
        """Unreferenced pages that hold a cached prefix (evictable)."""
        return len(self._evictable)

    @property
    def num_used_pages(self) -> int:
        """Pages referenced by live sequences."""
        return self.num_usable_pages - len(self._free) - len(self._evictable)

    @property
    def num_reserved_pages(self) -> int:
        """Pages promised to live sequences but not yet assigned."""
        return self._outstanding

    @property
    def num_available_pages(self) -> int:
        """Pages a new reservation may claim: free + evictable - promised."""
        return len(self._free) + len(self._evictable) - self._outstanding

    def usage(self) -> float:
        """Fraction of usable pages that live sequences hold."""
        return self.num_used_pages / self.num_usable_pages

    def reserved_fraction(self) -> float:
        """Fraction of usable pages held or promised: what admission sees as taken."""
        return (self.num_used_pages + self._outstanding) / self.num_usable_pages

    @property
    def prefix_queries_tokens(self) -> int:
        """Prompt tokens looked up in the prefix cache, summed over admitted sequences."""
        return self._queries_tokens

    @property
    def prefix_hit_tokens(self) -> int:
        """Prompt tokens served from the prefix cache, summed over admitted sequences."""
        return self._hit_tokens
