#!/usr/bin/env python3
"""Load factor at the first full bucket, for the hash map's placement choices
(groundwork for issue 13; docs/notes/hash_map_load_factor.md).

Each key picks the least-loaded of its candidate buckets (random hashes);
the run stops at the first key whose candidates are all full. Prints the
load (keys / slots) at that point. Pure simulation: no rdmads code.

  python3 docs/notes/bucket_choice_sim.py
"""
import random
def first_fail(G, b, choices, trials=3):
    res=[]
    for t in range(trials):
        random.seed(t)
        load=[0]*G
        n=0
        while True:
            cands=[random.randrange(G) for _ in range(choices)]
            g=min(cands, key=lambda x: load[x])
            if load[g]>=b: break
            load[g]+=1; n+=1
        res.append(n/(G*b))
    return res
for G in [1024, 65536]:
    print(G, "1 choice", first_fail(G,8,1,2), "2 choices", first_fail(G,8,2,2), "3", first_fail(G,8,3,1))
def first_fail_pairs(G, b, trials=2):
    res=[]
    for t in range(trials):
        random.seed(t)
        load=[0]*G
        n=0
        while True:
            g1=random.randrange(G); g2=random.randrange(G)
            cands=[g1,(g1+1)%G,g2,(g2+1)%G]
            g=min(cands, key=lambda x: load[x])
            if load[g]>=b: break
            load[g]+=1; n+=1
        res.append(n/(G*b))
    return res
print("pairs 65536", first_fail_pairs(65536,8))
print("pairs 16", [first_fail_pairs(16,8,1)[0] for _ in range(1)], "pairs 1024", first_fail_pairs(1024,8))
print("2 choices b16 32768", first_fail(32768,16,2,2))
print("2 choices b24 21845", first_fail(21845,24,2,1))
