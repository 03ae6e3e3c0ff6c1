#!/usr/bin/env python3
"""Load factor at the first full bucket, for the hash map's placement choices.

Simulates placing random keys into buckets of fixed size: each key goes to
the least-loaded of its candidate buckets (random hashes), and the run stops
at the first key whose candidates are all full. For each placement (one
bucket; 2 or 3 choices; 2 choices of adjacent pairs; 2 choices of 16- or
24-slot buckets; the hash map's units of [main 0][overflow][main 1] with two
16-slot candidate windows) it prints the load (keys / slots) at that point,
for seeds 0 and 1. Pure simulation: no rdmads code. The results, and what they
say about the map's layout, are in bench/README.md, "Hash map load factor";
the layout itself is in docs/design.md §9.2.1.

  python3 docs/notes/bucket_choice_sim.py
"""
import random


def first_full(buckets, slots, candidates, seed):
    """Load when a key first finds all of candidates(buckets) full."""
    rng = random.Random(seed)
    load = [0] * buckets
    keys = 0
    while True:
        best = min(candidates(rng, buckets), key=lambda b: load[b])
        if load[best] >= slots:
            return keys / (buckets * slots)
        load[best] += 1
        keys += 1


def choices(d):
    return lambda rng, n: [rng.randrange(n) for _ in range(d)]


def adjacent_pairs(rng, n):
    a, b = rng.randrange(n), rng.randrange(n)
    return [a, (a + 1) % n, b, (b + 1) % n]


def race_first_full(units, slots, seed):
    """RACE-style combined buckets: each unit is [main 0][overflow][main 1] of
    `slots` slots each; a key has two candidates (unit, side), each the side's
    main bucket plus the unit's shared overflow (contiguous: one READ). It
    goes to the candidate with more free slots, main bucket first. Load at
    the first key whose two candidates are both full (keys / all slots)."""
    rng = random.Random(seed)
    main = [[0, 0] for _ in range(units)]
    over = [0] * units
    keys = 0
    while True:
        cands = [(rng.randrange(units), rng.randrange(2)) for _ in range(2)]
        free = [(2 * slots - main[u][s] - over[u], u, s) for u, s in cands]
        f, u, s = max(free)
        if f == 0:
            return keys / (units * 3 * slots)
        if main[u][s] < slots:
            main[u][s] += 1
        else:
            over[u] += 1
        keys += 1


CASES = [
    ("1 group (today)", 65536, 8, choices(1)),
    ("2 choices", 65536, 8, choices(2)),
    ("3 choices", 65536, 8, choices(3)),
    ("2 choices, adjacent pairs", 65536, 8, adjacent_pairs),
    ("2 choices of 16-slot groups", 32768, 16, choices(2)),
    ("2 choices of 24-slot groups", 21845, 24, choices(2)),
]

if __name__ == "__main__":
    for name, buckets, slots, candidates in CASES:
        loads = [first_full(buckets, slots, candidates, seed) for seed in (0, 1)]
        print(f"{name:32s} {buckets:6d} x {slots:2d}: " + ", ".join(f"{x:.3f}" for x in loads))
    # 21,845 units of 3 groups: the same 65,535 x 8 slots as the cases above.
    loads = [race_first_full(21845, 8, seed) for seed in (0, 1)]
    print(f"{'RACE combined (main+shared ovf)':32s} {21845 * 3:6d} x  8: " + ", ".join(f"{x:.3f}" for x in loads))
