#!/usr/bin/env python3
"""Independent re-verification of lincheck histories (JSON lines).

A deliberately simple checker, sharing no code with the C++ one: the
standard-library JSON parser, its own sequential models, and the plain
Wing & Gong search (try every operation that may come next, recursively),
memoizing failed (linearized set, state) pairs. Exponential, so meant for
small histories: a saved failing history, or a test's short histories.

usage: recheck.py [--model NAME] [--budget N] [--max-ops N] FILE [FILE...]

Prints "FILE: ok|illegal|unknown [detail]" per file. Exit status for a single
file: 0 ok, 1 illegal, 3 unknown (search budget exhausted, or a partition
larger than --max-ops), 2 bad input; for several files, the worst of them
(2 > 1 > 3 > 0).

The schema is in tests/lincheck/README.md. Only Python 3 stdlib is used.
"""

import argparse
import json
import sys

PATHS = ("native", "loopback", "remote")
OP_FIELDS = {"thread", "node", "path", "op", "args", "result", "invoke_ns",
             "response_ns"}
INF = float("inf")


class BadInput(Exception):
    pass


# --- Reading -----------------------------------------------------------------

def read_history(text):
    """Returns (model or None, list of ops). Each op is a dict with keys
    name, args (tuple), result (tuple or None if pending), inv, res."""
    model = None
    ops = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise BadInput(f"line {number}: {e}")
        if not isinstance(obj, dict):
            raise BadInput(f"line {number}: not an object")
        if "format" in obj:
            if obj["format"] != "lincheck-history" or obj.get("version", 1) != 1:
                raise BadInput(f"line {number}: unsupported header")
            if ops:
                raise BadInput(f"line {number}: header after operations")
            model = obj.get("model")
            continue
        unknown = set(obj) - OP_FIELDS
        if unknown:
            raise BadInput(f"line {number}: unknown members {sorted(unknown)}")
        if not isinstance(obj.get("op"), str) or not obj["op"]:
            raise BadInput(f"line {number}: missing op")
        if not is_int(obj.get("invoke_ns")):
            raise BadInput(f"line {number}: missing or bad invoke_ns")
        if obj.get("path", "native") not in PATHS:
            raise BadInput(f"line {number}: bad path")
        args = int_list(obj.get("args"), number, "args")
        result = int_list(obj.get("result"), number, "result")
        response = obj.get("response_ns")
        if response is None:
            if result:
                raise BadInput(f"line {number}: pending operation with a result")
            res, result = INF, None
        elif is_int(response):
            res = response
            if res < obj["invoke_ns"]:
                raise BadInput(f"line {number}: response before invoke")
        else:
            raise BadInput(f"line {number}: bad response_ns")
        ops.append({"name": obj["op"], "args": tuple(args),
                    "result": None if result is None else tuple(result),
                    "inv": obj["invoke_ns"], "res": res})
    return model, ops


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def int_list(value, number, field):
    if value is None:
        return []
    if not isinstance(value, list) or not all(is_int(v) for v in value):
        raise BadInput(f"line {number}: {field} must be a list of integers")
    return value


# --- Sequential models ---------------------------------------------------------
# Each model: init() -> state (hashable); apply(state, name, args) ->
# (expected result tuple, new state); partition(ops) -> list of op lists.
# A recorded result is legal iff it equals the expected result.

SHAPES = {
    "register": {"read": (0, 1), "write": (1, 0), "cas": (2, 1)},
    "map": {"put": (2, 2), "get": (1, 2), "erase": (1, 2)},
    "ordered_map": {"put": (2, 2), "get": (1, 2), "erase": (1, 2),
                    "lower_bound": (1, 3)},
    "ordered_set": {"insert": (1, 1), "erase": (1, 1), "contains": (1, 1),
                    "lower_bound": (1, 2)},
    "queue": {"enqueue": (1, None), "dequeue": (0, 2)},
}


def apply_register(state, name, args):
    if name == "read":
        return (state,), state
    if name == "write":
        return (), args[0]
    ok = state == args[0]
    return (1 if ok else 0,), (args[1] if ok else state)


def apply_map(state, name, args):
    # state: tuple of sorted (key, value) pairs
    table = dict(state)
    key = args[0]
    if name == "lower_bound":
        keys = sorted(k for k in table if k >= key)
        return ((1, keys[0], table[keys[0]]) if keys else (0, 0, 0)), state
    found = key in table
    prev = (1, table[key]) if found else (0, 0)
    if name == "put":
        table[key] = args[1]
    elif name == "erase":
        table.pop(key, None)
    return prev, tuple(sorted(table.items()))


def apply_ordered_set(state, name, args):
    # state: frozenset of keys
    key = args[0]
    if name == "lower_bound":
        keys = sorted(k for k in state if k >= key)
        return ((1, keys[0]) if keys else (0, 0)), state
    present = key in state
    if name == "contains":
        return (1 if present else 0,), state
    if name == "insert":
        return (0 if present else 1,), state | {key}
    return (1 if present else 0,), state - {key}


def apply_queue(state, name, args):
    # state: tuple, front first. Unbounded: enqueue always succeeds.
    if name == "enqueue":
        return "enqueued", state + (args[0],)
    if not state:
        return (0, 0), state
    return (1, state[0]), state[1:]


MODELS = {
    "register": (lambda: 0, apply_register),
    "map": (lambda: (), apply_map),
    "ordered_map": (lambda: (), apply_map),
    "ordered_set": (lambda: frozenset(), apply_ordered_set),
    "queue": (lambda: (), apply_queue),
}


def legal(expected, recorded, name):
    if recorded is None:  # pending: result unknown
        return True
    if expected == "enqueued":
        return recorded in ((), (1,))
    return expected == recorded


def partitions(model, ops):
    per_key = model in ("map",) or (
        model in ("ordered_map", "ordered_set")
        and not any(op["name"] == "lower_bound" for op in ops))
    if not per_key:
        return [("whole history", ops)]
    groups = {}
    for op in ops:
        groups.setdefault(op["args"][0], []).append(op)
    return [(f"key {k}", g) for k, g in groups.items()]


def validate(model, ops):
    shapes = SHAPES[model]
    for i, op in enumerate(ops):
        if op["name"] not in shapes:
            raise BadInput(f"operation {i}: unknown {model} operation {op['name']}")
        nargs, nresult = shapes[op["name"]]
        if len(op["args"]) != nargs:
            raise BadInput(f"operation {i}: {op['name']} takes {nargs} argument(s)")
        if op["result"] is not None:
            if nresult is None:
                if len(op["result"]) > 1:
                    raise BadInput(f"operation {i}: bad enqueue result")
            elif len(op["result"]) != nresult:
                raise BadInput(f"operation {i}: bad result size")


# --- Wing & Gong search ----------------------------------------------------------

class OutOfBudget(Exception):
    pass


def linearizable(model, ops, budget):
    """True/False; raises OutOfBudget."""
    init, apply = MODELS[model]
    n = len(ops)
    completed = sum(1 << i for i, op in enumerate(ops) if op["res"] != INF)
    failed = set()
    steps = [0]
    sys.setrecursionlimit(max(1000, 4 * n + 100))

    def search(done, state):
        if done & completed == completed:
            return True  # pending leftovers never took effect
        if (done, state) in failed:
            return False
        steps[0] += 1
        if steps[0] > budget:
            raise OutOfBudget()
        # An op may go next iff no other op still to be placed, and completed,
        # returned before it was invoked.
        horizon = min(ops[j]["res"] for j in range(n)
                      if not done >> j & 1 and completed >> j & 1)
        for i in range(n):
            if done >> i & 1 or ops[i]["inv"] > horizon:
                continue
            op = ops[i]
            expected, after = apply(state, op["name"], op["args"])
            if not legal(expected, op["result"], op["name"]):
                continue
            if search(done | 1 << i, after):
                return True
        failed.add((done, state))
        return False

    return search(0, init())


def check(model, ops, budget, max_ops):
    """Returns (verdict, detail)."""
    validate(model, ops)
    undecided = None
    for label, group in sorted(partitions(model, ops), key=lambda p: len(p[1])):
        if len(group) > max_ops:
            undecided = undecided or (
                f"partition {label}: {len(group)} operations, more than "
                f"--max-ops={max_ops}")
            continue
        try:
            if not linearizable(model, group, budget):
                return "illegal", f"partition {label} ({len(group)} operations)"
        except OutOfBudget:
            undecided = undecided or f"partition {label}: search budget exhausted"
    if undecided:
        return "unknown", undecided
    return "ok", ""


EXIT = {"ok": 0, "illegal": 1, "unknown": 3, "bad": 2}
SEVERITY = {"ok": 0, "unknown": 1, "illegal": 2, "bad": 3}


def main(argv):
    parser = argparse.ArgumentParser(
        description="Independent brute-force re-check of lincheck JSON-lines "
                    "histories (small histories only).")
    parser.add_argument("--model", choices=sorted(MODELS),
                        help="default: the file header's model")
    parser.add_argument("--budget", type=int, default=500_000,
                        help="search steps per partition before giving up "
                             "(unknown); default %(default)s")
    parser.add_argument("--max-ops", type=int, default=400,
                        help="larger partitions are not searched (unknown); "
                             "default %(default)s")
    parser.add_argument("files", nargs="+", metavar="FILE")
    args = parser.parse_args(argv)
    worst = "ok"
    for name in args.files:
        try:
            with open(name, encoding="utf-8") as f:
                header_model, ops = read_history(f.read())
            model = args.model or header_model
            if model not in MODELS:
                raise BadInput(f"unknown or missing model {model!r}")
            verdict, detail = check(model, ops, args.budget, args.max_ops)
        except (OSError, BadInput) as e:
            verdict, detail = "bad", str(e)
        print(f"{name}: {verdict}" + (f" [{detail}]" if detail else ""))
        if SEVERITY[verdict] > SEVERITY[worst]:
            worst = verdict
    return EXIT[worst]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
