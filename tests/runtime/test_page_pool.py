"""PagePool: reservation admission, lazy assignment, prefix-cache sharing, LRU eviction, collisions.

The randomised tests drive the pool like an engine would and check it against `ReferencePool`, a
plain model keyed by whole token prefixes (no hashing), and against a simulated device: every KV
slot records the token prefix it was computed from, so a wrong match is visible as wrong content.
"""

from __future__ import annotations

import math
import random

import pytest

from dgjax.runtime.page_pool import (
    AdmissionError,
    PagePool,
    ReservationExceeded,
    TRASH_PAGE,
    chain_hash,
    salt_root,
)


def counters(pool: PagePool) -> dict:
    return dict(free=pool.num_free_pages, used=pool.num_used_pages, cached=pool.num_cached_pages,
                reserved=pool.num_reserved_pages, available=pool.num_available_pages,
                usage=pool.usage(), reserved_fraction=pool.reserved_fraction(),
                sequences=pool.num_sequences)


def run_prompt(pool: PagePool, seq_id, prompt, max_total=None) -> int:
    """Admit, assign pages for the whole prompt, 'prefill' it and register its full pages."""
    cached = pool.reserve(seq_id, prompt, max_total or len(prompt))
    pool.ensure_capacity(seq_id, len(prompt))
    pool.register_full_pages(seq_id, prompt)
    return cached


def rand_tokens(rng: random.Random, n: int, vocab: int = 1000) -> list[int]:
    return [rng.randrange(vocab) for _ in range(n)]


# ---- allocation and admission ----------------------------------------------------------------
def test_allocation_free_round_trip_restores_every_counter():
    pool = PagePool(num_pages=40, page_size=4)
    before = counters(pool)
    assert before["free"] == 39 and before["used"] == 0 and before["usage"] == 0.0
    rng = random.Random(0)
    lengths = {f"s{i}": (rng.randrange(1, 20), rng.randrange(0, 10)) for i in range(5)}
    for sid, (n_prompt, n_gen) in lengths.items():
        pool.reserve(sid, rand_tokens(rng, n_prompt), n_prompt + n_gen)
        pool.ensure_capacity(sid, n_prompt + n_gen // 2)
    tables = [pool.block_table(sid) for sid in lengths]
    flat = [p for t in tables for p in t]
    assert len(flat) == len(set(flat)), "a page was handed to two sequences"
    assert TRASH_PAGE not in flat and all(0 < p < 40 for p in flat)
    for sid, (n_prompt, n_gen) in lengths.items():
        assert len(pool.block_table(sid)) == math.ceil((n_prompt + n_gen // 2) / 4)
    total_reserved = sum(math.ceil((a + b) / 4) for a, b in lengths.values())
    assert pool.num_used_pages == len(flat)
    assert pool.num_reserved_pages == total_reserved - len(flat)
    assert pool.reserved_fraction() == pytest.approx(total_reserved / 39)
    assert pool.usage() == pytest.approx(len(flat) / 39)
    for sid in lengths:
        pool.free(sid)
    assert counters(pool) == before


def test_admission_accepts_exactly_what_fits_and_refuses_one_token_more():
    ps = 4
    pool = PagePool(num_pages=21, page_size=ps)  # 20 usable pages
    pool.reserve("a", [1, 2, 3], 3 * ps + 1)  # 4 pages reserved, none assigned yet
    room = 20 - 4
    assert pool.num_available_pages == room
    assert pool.can_admit(room * ps)
    assert not pool.can_admit(room * ps + 1)
    before = counters(pool)
    with pytest.raises(AdmissionError):
        pool.reserve("b", [5], room * ps + 1)
    assert not pool.try_reserve("b", [5], room * ps + 1)
    assert counters(pool) == before and "b" not in pool
    pool.reserve("b", [5], room * ps)
    assert not pool.can_admit(1) and pool.num_available_pages == 0
    # Every reservation can be drawn on in full: nothing overruns.
    pool.ensure_capacity("a", 3 * ps + 1)
    pool.ensure_capacity("b", room * ps)
    assert pool.num_free_pages == 0 and pool.num_used_pages == 20
    pool.free("a")
    assert pool.can_admit(4 * ps) and not pool.can_admit(4 * ps + 1)


def test_growing_past_the_reservation_raises():
    pool = PagePool(num_pages=10, page_size=4)
    pool.reserve("a", [1, 2], 6)
    assert pool.ensure_capacity("a", 5) == pool.block_table("a")
    assert len(pool.block_table("a")) == 2
    assert pool.ensure_capacity("a", 8) == []  # still within the reserved 2 pages
    with pytest.raises(ReservationExceeded):
        pool.ensure_capacity("a", 9)


def test_cached_pages_count_as_admissible_capacity():
    ps = 4
    pool = PagePool(num_pages=9, page_size=ps)
    rng = random.Random(1)
    run_prompt(pool, "a", rand_tokens(rng, 8 * ps))
    pool.free("a")
    assert pool.num_cached_pages == 8 and pool.num_free_pages == 0
    assert pool.can_admit(8 * ps) and not pool.can_admit(8 * ps + 1)
    pool.reserve("b", rand_tokens(rng, 8 * ps), 8 * ps)
    new = pool.ensure_capacity("b", 8 * ps)
    assert len(new) == 8 and pool.num_cached_pages == 0


def test_admission_with_a_prompt_credits_pages_already_referenced():
    ps = 4
    pool = PagePool(num_pages=7, page_size=ps)  # 6 usable
    prompt = rand_tokens(random.Random(2), 4 * ps + 1)
    run_prompt(pool, "a", prompt)  # holds 5 pages, 4 of them full and cached
    assert pool.num_available_pages == 1
    assert not pool.can_admit(len(prompt))  # blind: 5 pages needed
    assert pool.can_admit(len(prompt), prompt)  # 4 shared pages need nothing new
    assert pool.reserve("b", prompt, len(prompt)) == 4 * ps


# ---- prefix matching -------------------------------------------------------------------------
@pytest.mark.parametrize("prompt_len", [1, 4, 5, 12, 13, 15, 16, 17])
def test_identical_prompt_shares_every_full_page_but_leaves_a_token_to_compute(prompt_len):
    ps = 4
    pool = PagePool(num_pages=32, page_size=ps)
    prompt = rand_tokens(random.Random(prompt_len), prompt_len)
    assert run_prompt(pool, "a", prompt) == 0
    expected_pages = (prompt_len - 1) // ps  # largest page multiple strictly below the length
    shared = pool.block_table("a")[:expected_pages]
    assert pool.match_prefix(prompt) == (expected_pages * ps, shared)
    cached = pool.reserve("b", prompt, prompt_len + 3)
    assert cached == expected_pages * ps < prompt_len
    assert pool.num_cached_tokens("b") == cached
    assert pool.block_table("b") == shared
    assert all(pool.refcount(p) == 2 for p in shared)
    pool.ensure_capacity("b", prompt_len + 3)
    assert set(pool.block_table("b")[expected_pages:]).isdisjoint(pool.block_table("a"))
    assert pool.prefix_queries_tokens == 2 * prompt_len
    assert pool.prefix_hit_tokens == cached


def test_divergent_prompts_share_only_the_common_full_page_prefix():
    ps = 4
    rng = random.Random(3)
    for trial in range(30):
        pool = PagePool(num_pages=64, page_size=ps)
        common = rng.randrange(0, 30)
        base = rand_tokens(rng, common)
        a = base + rand_tokens(rng, rng.randrange(1, 10))
        b = base + [a[common] + 1] + rand_tokens(rng, rng.randrange(0, 10))
        run_prompt(pool, "a", a)
        expected = min(common // ps, (len(b) - 1) // ps)
        cached = pool.reserve("b", b, len(b))
        assert cached == expected * ps, trial
        assert pool.block_table("b") == pool.block_table("a")[:expected]


def test_concurrent_identical_prompts_keep_the_first_registered_page():
    ps = 4
    pool = PagePool(num_pages=32, page_size=ps)
    prompt = rand_tokens(random.Random(4), 3 * ps + 2)
    pool.reserve("a", prompt, len(prompt))
    pool.reserve("b", prompt, len(prompt))  # admitted before "a" registered anything
    for sid in ("a", "b"):
        pool.ensure_capacity(sid, len(prompt))
    pool.register_full_pages("a", prompt)
    pool.register_full_pages("b", prompt)
    a_pages, b_pages = pool.block_table("a"), pool.block_table("b")
    assert all(pool.is_cached(p) for p in a_pages[:3])
    assert not any(pool.is_cached(p) for p in b_pages)
    pool.free("a")
    pool.free("b")
    assert pool.num_cached_pages == 3 and pool.num_free_pages == 31 - 3
    assert pool.match_prefix(prompt + [7]) == (3 * ps, a_pages[:3])


def test_generated_tokens_become_matchable_for_a_follow_up_turn():
    ps = 4
    pool = PagePool(num_pages=32, page_size=ps)
    rng = random.Random(5)
    prompt, reply = rand_tokens(rng, 6), rand_tokens(rng, 9)
    written = prompt + reply
    pool.reserve("turn1", prompt, len(written))
    for n in range(len(prompt), len(written) + 1):  # one decode step at a time
        pool.ensure_capacity("turn1", n)
        pool.register_full_pages("turn1", written[:n])
    full = len(written) // ps
    table = pool.block_table("turn1")
    pool.free("turn1")
    follow_up = written + rand_tokens(rng, 5)
    assert pool.match_prefix(follow_up) == (full * ps, table[:full])
    assert pool.reserve("turn2", follow_up, len(follow_up)) == full * ps


def test_cache_salt_confines_sharing_to_requests_with_the_same_salt():
    ps = 4
    pool = PagePool(num_pages=64, page_size=ps)
    prompt = rand_tokens(random.Random(6), 3 * ps + 1)
    pool.reserve("plain", prompt, len(prompt))
    pool.ensure_capacity("plain", len(prompt))
    pool.register_full_pages("plain", prompt)
    assert pool.match_prefix(prompt, salt="tenant-a") == (0, [])
    assert pool.reserve("a1", prompt, len(prompt), salt="tenant-a") == 0
    pool.ensure_capacity("a1", len(prompt))
    pool.register_full_pages("a1", prompt)
    a_pages = pool.block_table("a1")[:3]
    assert set(a_pages).isdisjoint(pool.block_table("plain"))
    assert pool.reserve("a2", prompt, len(prompt), salt="tenant-a") == 3 * ps
    assert pool.block_table("a2") == a_pages
    assert pool.reserve("b", prompt, len(prompt), salt="tenant-b") == 0
    assert pool.reserve("plain2", prompt, len(prompt)) == 3 * ps
    assert pool.block_table("plain2") == pool.block_table("plain")[:3]


def test_a_salted_first_page_whose_digest_collides_is_never_matched():
    """With 1-byte digests, find a salt whose first-page digest equals an unsalted prompt's: the
    stored root tells them apart, in both directions."""
    ps, ds = 2, 1
    prompt = [3, 4, 5]
    target = chain_hash(None, prompt[:ps], ds)
    salt = next(f"s{i}" for i in range(10_000)
                if chain_hash(salt_root(f"s{i}", ds), prompt[:ps], ds) == target)
    pool = PagePool(num_pages=16, page_size=ps, digest_size=ds)
    run_prompt(pool, "plain", prompt)
    assert pool.match_prefix(prompt, salt=salt) == (0, [])
    assert pool.reserve("salted", prompt, len(prompt), salt=salt) == 0
    pool.ensure_capacity("salted", len(prompt))
    pool.register_full_pages("salted", prompt)  # collides with the plain entry: stays private
    assert not pool.is_cached(pool.block_table("salted")[0])
    assert pool.match_prefix(prompt) == (ps, pool.block_table("plain")[:1])


def test_registering_beyond_the_assigned_pages_is_refused():
    pool = PagePool(num_pages=8, page_size=4)
    pool.reserve("a", list(range(12)), 12)
    pool.ensure_capacity("a", 4)
    with pytest.raises(ValueError):
        pool.register_full_pages("a", list(range(8)))


# ---- eviction --------------------------------------------------------------------------------
def test_eviction_takes_never_cached_pages_first_then_lru_and_spares_referenced_pages():
    ps = 2
    pool = PagePool(num_pages=13, page_size=ps)  # 12 usable
    rng = random.Random(6)
    prompts = {sid: rand_tokens(rng, 2 * ps) for sid in ("x", "y", "z")}
    for sid, prompt in prompts.items():
        run_prompt(pool, sid, prompt)
    tables = {sid: pool.block_table(sid) for sid in prompts}
    pool.free("y")
    pool.free("x")  # z stays live: its pages must never be touched
    lru_order = tables["y"][::-1] + tables["x"][::-1]  # freed in that order, tails first
    assert pool.num_free_pages == 6 and pool.num_cached_pages == 4
    pool.reserve("big", rand_tokens(rng, 1), 10 * ps)
    never_cached = pool.ensure_capacity("big", 6 * ps)
    assert not set(never_cached) & set(lru_order) and pool.num_cached_pages == 4
    evicted = []
    for n in range(7, 11):
        evicted += pool.ensure_capacity("big", n * ps)
    assert evicted == lru_order
    assert pool.block_table("z") == tables["z"] and all(pool.is_cached(p) for p in tables["z"])
    assert pool.match_prefix(prompts["x"] + [1]) == (0, [])
    assert pool.match_prefix(prompts["z"] + [1]) == (2 * ps, tables["z"])


def test_pages_below_an_evicted_duplicate_are_not_cached():
    ps = 2
    pool = PagePool(num_pages=13, page_size=ps)  # 12 usable
    rng = random.Random(14)
    prompt = rand_tokens(rng, 2 * ps + 1)
    tokens = prompt + rand_tokens(rng, 4)
    pool.reserve("a", prompt, len(prompt))
    pool.reserve("b", prompt, len(tokens))
    pool.ensure_capacity("a", len(prompt))
    pool.ensure_capacity("b", len(tokens))
    pool.register_full_pages("a", prompt)
    pool.register_full_pages("b", prompt)  # b's chain now runs through a's cached pages
    pool.free("a")
    pool.reserve("big", [1], 7 * ps)
    pool.ensure_capacity("big", 7 * ps)  # takes the 5 free pages and both of a's cached ones
    assert pool.num_cached_pages == 0
    pool.register_full_pages("b", tokens)  # b's later pages have no cached parent to hang from
    assert not any(pool.is_cached(p) for p in pool.block_table("b"))
    pool.free("b")
    assert pool.num_cached_pages == 0 and pool.match_prefix(tokens + [1]) == (0, [])


def test_a_match_refreshes_the_lru_position():
    ps = 2
    pool = PagePool(num_pages=5, page_size=ps)  # 4 usable
    rng = random.Random(7)
    old, new = rand_tokens(rng, ps + 1), rand_tokens(rng, ps + 1)
    run_prompt(pool, "old", old)
    run_prompt(pool, "new", new)
    old_page, new_page = pool.block_table("old")[0], pool.block_table("new")[0]
    pool.free("old")
    pool.free("new")
    assert pool.reserve("again", old, len(old)) == ps  # touches old's page
    pool.free("again")
    pool.reserve("filler", [0], 3 * ps)
    evicted = pool.ensure_capacity("filler", 3 * ps)
    assert new_page in evicted and old_page not in evicted
    assert pool.match_prefix(old)[1] == [old_page]


def test_evicting_a_parent_uncaches_its_descendants():
    ps = 2
    pool = PagePool(num_pages=13, page_size=ps)  # 12 usable
    rng = random.Random(8)
    prompt = rand_tokens(rng, 2 * ps + 1)
    tokens = prompt + rand_tokens(rng, 4)
    pool.reserve("a", prompt, len(prompt))
    pool.reserve("b", prompt, len(tokens))  # admitted before "a" registered: nothing matched
    pool.ensure_capacity("a", len(prompt))
    pool.ensure_capacity("b", len(tokens))
    pool.register_full_pages("a", prompt)  # a's pages 0, 1 cached
    pool.register_full_pages("b", tokens)  # b's pages 0, 1 duplicate; its pages 2, 3 hang below a's
    a_pages, b_pages = pool.block_table("a"), pool.block_table("b")
    assert [pool.is_cached(p) for p in b_pages] == [False, False, True, True, False]
    pool.free("a")
    pool.free("b")  # LRU: a's page 1, a's page 0, b's page 3, b's page 2
    assert pool.num_cached_pages == 4 and pool.num_free_pages == 8
    assert pool.match_prefix(tokens + [1]) == (4 * ps, a_pages[:2] + b_pages[2:4])
    pool.reserve("big", [1], 9 * ps)
    pool.ensure_capacity("big", 8 * ps)
    assert pool.ensure_capacity("big", 9 * ps) == [a_pages[1]]
    # b's pages 2 and 3 could only be reached through a's page 1: they are free now, not cached.
    assert pool.num_cached_pages == 1 and pool.num_free_pages == 2
    assert not pool.is_cached(b_pages[2]) and not pool.is_cached(b_pages[3])
    assert pool.match_prefix(tokens + [1]) == (ps, a_pages[:1])


# ---- hash collisions -------------------------------------------------------------------------
def find_root_collision(digest_size: int, ps: int, rng: random.Random):
    seen = {}
    while True:
        tokens = tuple(rand_tokens(rng, ps))
        h = chain_hash(None, tokens, digest_size)
        if h in seen and seen[h] != tokens:
            return list(seen[h]), list(tokens)
        seen[h] = tokens


def test_a_colliding_first_page_is_never_matched():
    ps, ds = 2, 1
    a, c = find_root_collision(ds, ps, random.Random(9))
    pool = PagePool(num_pages=16, page_size=ps, digest_size=ds)
    tail = [5, 6, 7]
    run_prompt(pool, "x", a + tail)
    assert pool.match_prefix(c + tail) == (0, [])
    e = [8, 9]
    assert run_prompt(pool, "w", c + e + tail) == 0  # its pages stay private, the entry stays a's
    assert not any(pool.is_cached(p) for p in pool.block_table("w"))
    assert pool.match_prefix(c + tail) == (0, [])
    assert pool.match_prefix(a + tail)[0] == 2 * ps
    # w's second page was computed after c, so it must not hang below a's page either.
    assert pool.match_prefix(a + e + tail) == (ps, pool.block_table("x")[:1])


def test_a_colliding_child_under_a_different_parent_is_never_matched():
    ps, ds = 2, 1
    rng = random.Random(10)
    a, b = rand_tokens(rng, ps), rand_tokens(rng, ps)
    h_ab = chain_hash(chain_hash(None, a, ds), b, ds)
    while True:  # d: a different first page whose chain collides with a's on the second page
        d = rand_tokens(rng, ps)
        h_d = chain_hash(None, d, ds)
        if d != a and h_d != chain_hash(None, a, ds) and chain_hash(h_d, b, ds) == h_ab:
            break
    pool = PagePool(num_pages=16, page_size=ps, digest_size=ds)
    run_prompt(pool, "x", a + b + [1])
    run_prompt(pool, "y", d + [3])  # caches d's page alone
    d_page = pool.block_table("y")[0]
    # The chain digest of d+b is the key of a+b's second page and the tokens agree: only the
    # parent link tells them apart.
    assert pool.match_prefix(d + b + [1]) == (ps, [d_page])


class ReferencePool:
    """The expected pool state, kept with whole token prefixes as keys and no hashing."""

    class Entry:
        def __init__(self, page, prefix):
            self.page, self.prefix, self.alive = page, prefix, True

    def __init__(self, usable: int, ps: int):
        self.usable, self.ps = usable, ps
        self.refs: dict[int, int] = {}
        self.cache: dict[tuple, ReferencePool.Entry] = {}
        self.by_page: dict[int, ReferencePool.Entry] = {}
        self.last_use: dict[int, int] = {}
        self.clock = 0
        self.seqs: dict = {}  # id -> dict(pages, max_pages, hashed, last, stopped)
        self.queries = self.hits = 0

    def referenced(self) -> set[int]:
        return {p for p, n in self.refs.items() if n > 0}

    def evictable(self) -> set[int]:
        return {p for p in self.by_page if self.refs.get(p, 0) == 0}

    def outstanding(self) -> int:
        return sum(s["max_pages"] - len(s["pages"]) for s in self.seqs.values())

    def num_free(self) -> int:
        return self.usable - len(self.referenced()) - len(self.evictable())

    def match(self, prompt) -> list[int]:
        pages = []
        for i in range((len(prompt) - 1) // self.ps if prompt else 0):
            entry = self.cache.get(tuple(prompt[: (i + 1) * self.ps]))
            if entry is None:
                break
            pages.append(entry.page)
        return pages

    def fits(self, prompt, max_total) -> bool:
        pages = self.match(prompt)
        revived = sum(1 for p in pages if self.refs.get(p, 0) == 0)
        need = math.ceil(max_total / self.ps) - len(pages)
        return need <= self.num_free() + len(self.evictable()) - self.outstanding() - revived

    def reserve(self, sid, prompt, max_total):
        pages = self.match(prompt)
        for p in pages:
            self.refs[p] = self.refs.get(p, 0) + 1
        last = self.by_page[pages[-1]] if pages else None
        self.seqs[sid] = dict(pages=list(pages), max_pages=math.ceil(max_total / self.ps),
                              hashed=len(pages), last=last, stopped=False)
        self.queries += len(prompt)
        self.hits += len(pages) * self.ps
        return len(pages) * self.ps

    def drop(self, entry):
        for prefix in [k for k in self.cache if k[: len(entry.prefix)] == entry.prefix]:
            dropped = self.cache.pop(prefix)
            dropped.alive = False
            del self.by_page[dropped.page]

    def check_allocation(self, page):
        """The pool handed out `page`: it must be what the rules pick. Then model the take."""
        assert self.refs.get(page, 0) == 0
        if self.num_free() > 0:
            assert page not in self.by_page, "evicted while never-cached pages were free"
        else:
            lru = min(self.evictable(), key=self.last_use.__getitem__)
            assert page == lru, "eviction is not least recently used"
            self.drop(self.by_page[page])
        self.refs[page] = 1

    def register(self, sid, tokens):
        seq = self.seqs[sid]
        for i in range(seq["hashed"], len(tokens) // self.ps):
            if seq["stopped"] or (i > 0 and (seq["last"] is None or not seq["last"].alive)):
                seq["stopped"] = True
                return
            prefix = tuple(tokens[: (i + 1) * self.ps])
            entry = self.cache.get(prefix)
            if entry is None:
                entry = self.Entry(seq["pages"][i], prefix)
                self.cache[prefix] = entry
                self.by_page[entry.page] = entry
            seq["hashed"], seq["last"] = i + 1, entry

    def free(self, sid):
        for page in reversed(self.seqs.pop(sid)["pages"]):
            self.refs[page] -= 1
            if self.refs[page] == 0:
                self.clock += 1
                self.last_use[page] = self.clock


def drive(pool: PagePool, rng: random.Random, steps: int, ref: ReferencePool | None):
    """An engine-like random workload; checks content safety always and `ref` when given.

    Returns the prefixes of every full page written.
    """
    ps = pool.page_size
    docs = [rand_tokens(rng, 40, vocab=6) for _ in range(3)]  # shared prefixes, tiny vocab
    kv: dict[int, list] = {}  # page -> the token prefix each slot's KV was computed from
    full_prefixes: set[tuple] = set()  # every full page's prefix ever written
    live: dict[int, dict] = {}  # id -> dict(tokens, written, max_total)
    next_id = 0
    for _ in range(steps):
        op = rng.random()
        if op < 0.35 or not live:
            doc = rng.choice(docs)
            prompt = doc[: rng.randrange(0, 30)] + rand_tokens(rng, rng.randrange(1, 8), vocab=6)
            max_total = len(prompt) + rng.randrange(0, 12)
            sid, next_id = next_id, next_id + 1
            expect = ref.fits(prompt, max_total) if ref else None
            admissible = pool.can_admit(max_total, prompt)
            assert expect in (None, admissible)
            assert pool.try_reserve(sid, prompt, max_total) == admissible
            if not admissible:
                continue
            cached = pool.num_cached_tokens(sid)
            assert cached % ps == 0 and cached < len(prompt)
            if ref:
                assert ref.reserve(sid, prompt, max_total) == cached
                assert pool.block_table(sid) == ref.seqs[sid]["pages"]
            for j, page in enumerate(pool.block_table(sid)):  # a match must hold exactly our KV
                assert kv[page] == [tuple(prompt[: j * ps + s + 1]) for s in range(ps)]
            continuation = rng.choice(docs + [None])
            tokens = prompt + (continuation[len(prompt):] if continuation else [])
            tokens += rand_tokens(rng, max_total - len(tokens), vocab=6)
            live[sid] = dict(tokens=tokens[:max_total], written=cached, max_total=max_total)
        elif op < 0.85:
            sid = rng.choice(list(live))
            s = live[sid]
            if s["written"] == s["max_total"]:
                continue
            n = min(s["max_total"], s["written"] + rng.choice([1, 1, 1, 3, 7]))
            new_pages = pool.ensure_capacity(sid, n)
            if ref:
                for page in new_pages:
                    ref.check_allocation(page)
                ref.seqs[sid]["pages"] += new_pages
            table = pool.block_table(sid)
            for pos in range(s["written"], n):
                page = table[pos // ps]
                assert pool.refcount(page) == 1 and not pool.is_cached(page), "shared page written"
                kv.setdefault(page, [None] * ps)[pos % ps] = tuple(s["tokens"][: pos + 1])
                if pos % ps == ps - 1:
                    full_prefixes.add(tuple(s["tokens"][: pos + 1]))
            s["written"] = n
            pool.register_full_pages(sid, s["tokens"][:n])
            if ref:
                ref.register(sid, s["tokens"][:n])
        else:
            sid = rng.choice(list(live))
            del live[sid]
            pool.free(sid)
            if ref:
                ref.free(sid)
        parts = pool.num_free_pages + pool.num_used_pages + pool.num_cached_pages
        assert parts == pool.num_usable_pages
        assert pool.num_available_pages >= 0
        if ref:
            assert pool.num_used_pages == len(ref.referenced())
            assert pool.num_cached_pages == len(ref.evictable())
            assert pool.num_reserved_pages == ref.outstanding()
            assert all(pool.refcount(p) == ref.refs.get(p, 0) for p in range(1, pool.num_pages))
            assert all(pool.is_cached(p) == (p in ref.by_page) for p in range(1, pool.num_pages))
            assert (pool.prefix_queries_tokens, pool.prefix_hit_tokens) == (ref.queries, ref.hits)
    for sid in list(live):
        pool.free(sid)
    assert pool.num_used_pages == 0 and pool.num_reserved_pages == 0
    return full_prefixes


@pytest.mark.parametrize("seed", range(8))
def test_random_interleavings_match_the_reference_model(seed):
    rng = random.Random(seed)
    ps = rng.choice([1, 2, 4])
    pool = PagePool(num_pages=rng.choice([12, 24, 40]), page_size=ps)
    ref = ReferencePool(pool.num_usable_pages, ps)
    drive(pool, rng, steps=1500, ref=ref)
    assert pool.prefix_hit_tokens > 0, "the workload never exercised sharing"


@pytest.mark.parametrize("seed", range(8))
def test_forced_hash_collisions_never_produce_a_wrong_match(seed):
    rng = random.Random(100 + seed)
    ps = rng.choice([1, 2])
    pool = PagePool(num_pages=rng.choice([16, 40]), page_size=ps, digest_size=1)  # 256 keys
    prefixes = drive(pool, rng, steps=1500, ref=None)  # asserts matched pages hold the prompt's KV
    assert pool.prefix_hit_tokens > 0

    def digest(prefix):
        h = None
        for i in range(0, len(prefix), ps):
            h = chain_hash(h, prefix[i:i + ps], 1)
        return h

    assert len({digest(p) for p in prefixes}) < len(prefixes), "no collision was exercised"


# ---- disabled mode ---------------------------------------------------------------------------
def test_disabled_cache_neither_matches_nor_registers():
    ps = 4
    pool = PagePool(num_pages=32, page_size=ps, enable_prefix_cache=False)
    prompt = rand_tokens(random.Random(11), 3 * ps + 1)
    run_prompt(pool, "a", prompt)
    assert not any(pool.is_cached(p) for p in pool.block_table("a"))
    assert pool.match_prefix(prompt) == (0, [])
    assert pool.reserve("b", prompt, len(prompt)) == 0
    pool.free("a")
    pool.free("b")
    assert pool.num_cached_pages == 0 and pool.num_free_pages == 31
    assert pool.prefix_queries_tokens == 0 and pool.prefix_hit_tokens == 0


def test_disabling_at_runtime_forgets_the_cache_and_reenabling_starts_fresh():
    ps = 4
    pool = PagePool(num_pages=32, page_size=ps)
    prompt = rand_tokens(random.Random(12), 3 * ps + 1)
    run_prompt(pool, "live", prompt, max_total=len(prompt) + 3)
    run_prompt(pool, "done", prompt + [1, 2, 3, 4])
    pool.free("done")
    assert pool.num_cached_pages == 1 and pool.match_prefix(prompt)[0] == 3 * ps
    pool.set_enabled(False)
    assert not pool.enabled and pool.num_cached_pages == 0
    assert not any(pool.is_cached(p) for p in pool.block_table("live"))
    assert pool.match_prefix(prompt) == (0, [])
    assert pool.num_used_pages == len(pool.block_table("live"))
    pool.set_enabled(True)
    assert pool.match_prefix(prompt) == (0, [])
    # A sequence whose cached chain was forgotten registers nothing more: nothing could reach it.
    pool.ensure_capacity("live", len(prompt) + 3)
    pool.register_full_pages("live", prompt + [1, 2, 3])
    assert not any(pool.is_cached(p) for p in pool.block_table("live"))
    assert run_prompt(pool, "fresh", prompt) == 0
    assert pool.match_prefix(prompt) == (3 * ps, pool.block_table("fresh")[:3])


def test_per_request_opt_out_skips_the_lookup_but_may_still_share_its_pages():
    ps = 4
    pool = PagePool(num_pages=32, page_size=ps)
    prompt = rand_tokens(random.Random(13), 2 * ps + 1)
    run_prompt(pool, "a", prompt)
    assert pool.reserve("echo", prompt, len(prompt), use_prefix_cache=False) == 0
    assert pool.prefix_queries_tokens == len(prompt)  # only "a" was looked up
    assert set(pool.block_table("a")).isdisjoint(pool.ensure_capacity("echo", len(prompt)))
