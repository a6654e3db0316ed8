"""locks_check.py - checks the lock owners of one dump of lock_target.

Usage: python3 locks_check.py [--quiet] [--names FILE] LABEL < dump.json
Prints one TAP line per scenario of tests/fixtures/lock_target.c, "ok -" or
"not ok -", each with LABEL (how the dump was taken). With --quiet, prints
nothing and exits 0 when every scenario holds, 1 otherwise (for polling).
--names FILE gives the threads' names ("TID NAME" lines, from the live
process): a core file keeps no thread names.
"""
import json
import sys


def named(threads, name):
    return [t for t in threads if t.get("name") == name]


def one(threads, name):
    ts = named(threads, name)
    if len(ts) != 1:
        raise AssertionError("%d threads named %s" % (len(ts), name))
    return ts[0]


def waits(t):
    w = t.get("waiting_for")
    if not w:
        raise AssertionError("%s (%d) waits for nothing" % (t["name"], t["tid"]))
    return w


def owner_is(t, owner, kind="mutex"):
    w = waits(t)
    if w.get("kind") != kind:
        raise AssertionError("%s: kind %r, not %s" % (t["name"], w.get("kind"), kind))
    if w.get("owner_tid") != owner["tid"] or w.get("owner_name") != owner["name"]:
        raise AssertionError("%s: owner %r (%r), not %s (%d)" % (
            t["name"], w.get("owner_tid"), w.get("owner_name"), owner["name"], owner["tid"]))
    if not w.get("address", "").startswith("0x"):
        raise AssertionError("%s: address %r" % (t["name"], w.get("address")))
    return w


def check(d):
    threads = d.get("threads", [])
    tids = {t["tid"] for t in threads}
    cycles = d.get("deadlocks", [])
    out = []

    def case(what, fn):
        try:
            fn()
            out.append((True, what, ""))
        except (AssertionError, KeyError, TypeError) as e:
            out.append((False, what, str(e)))

    def abba():
        a, b = one(threads, "abba-1"), one(threads, "abba-2")
        wa, wb = owner_is(a, b), owner_is(b, a)
        if not (wa.get("deadlock") and wb.get("deadlock")):
            raise AssertionError("not marked deadlock")
        if len(cycles) != 1 or sorted(cycles[0]["threads"]) != sorted([a["tid"], b["tid"]]):
            raise AssertionError("deadlocks %r" % cycles)
        if sorted(cycles[0]["locks"]) != sorted([wa["address"], wb["address"]]):
            raise AssertionError("cycle locks %r" % cycles[0]["locks"])

    def chain():
        c1, c2, c3 = (one(threads, "chain-%d" % i) for i in (1, 2, 3))
        w1, w2 = owner_is(c1, c2), owner_is(c2, c3)
        if c3.get("waiting_for") or w1.get("deadlock") or w2.get("deadlock"):
            raise AssertionError("chain-3 waits, or the chain is called a deadlock")

    def recursive():
        w = owner_is(one(threads, "rec-waiter"), one(threads, "rec-owner"))
        if w.get("held") != 2:
            raise AssertionError("held %r, not 2" % w.get("held"))

    def errorcheck():
        owner_is(one(threads, "ec-waiter"), one(threads, "ec-owner"))

    def timed():
        owner_is(one(threads, "tm-waiter"), one(threads, "tm-owner"))

    def pi():
        owner_is(one(threads, "pi-waiter"), one(threads, "pi-owner"))

    def robust():
        w = owner_is(one(threads, "rb-waiter"), one(threads, "rb-heir"))
        if not w.get("owner_died"):
            raise AssertionError("owner_died not set")

    def exited():
        w = waits(one(threads, "gone-waiter"))
        if not w.get("owner_exited") or w.get("owner_tid") in tids or not w.get("owner_tid"):
            raise AssertionError("gone-waiter: %r" % w)

    def rwlock():
        writer = one(threads, "rw-writer")
        readers = named(threads, "rw-reader")
        if len(readers) != 2:
            raise AssertionError("%d readers" % len(readers))
        addrs = set()
        for r in readers:
            w = owner_is(r, writer, "rwlock")
            if w.get("mode") != "read":
                raise AssertionError("reader mode %r" % w.get("mode"))
            addrs.add(w["address"])
        w = owner_is(one(threads, "rw-writer2"), writer, "rwlock")
        if w.get("mode") != "write":
            raise AssertionError("writer mode %r" % w.get("mode"))
        addrs.add(w["address"])
        if len(addrs) != 1:
            raise AssertionError("addresses %r" % addrs)

    def named_locks():
        c1, c2, c3 = (one(threads, "chain-%d" % i) for i in (1, 2, 3))
        got = (waits(c1).get("symbol"), waits(c2).get("symbol"))
        if got != ("chain_m2", "chain_far+0x10000"):
            raise AssertionError("chain-1, chain-2 wait for %r" % (got,))
        w = waits(named(threads, "rw-reader")[0])
        if w.get("symbol") != "rw":
            raise AssertionError("rw-reader waits for %r" % w.get("symbol"))
        for owner, want in ((c3, [("mutex", "chain_far+0x10000", 1, waits(c2)["address"])]),
                            (c2, [("mutex", "chain_m2", 1, waits(c1)["address"])]),
                            (one(threads, "rw-writer"), [("rwlock", "rw", 3, w["address"])])):
            got = [(h.get("kind"), h.get("symbol"), h.get("waiters"), h.get("address"))
                   for h in owner.get("holds", [])]
            if got != want:
                raise AssertionError("%s holds %r, not %r" % (owner["name"], got, want))
        held = [t["name"] for t in threads if t.get("holds")]
        if "cv-waiter" in held or "chain-1" in held:
            raise AssertionError("holds said of %r" % held)

    def condvar():
        cv = named(threads, "cv-waiter")
        if len(cv) != 50:
            raise AssertionError("%d cv-waiter threads" % len(cv))
        said = [t["tid"] for t in cv if t.get("waiting_for")]
        if said:
            raise AssertionError("owners reported for %r" % said)

    case("ABBA on two mutexes: each owner named, one deadlock of both", abba)
    case("a chain of three: chain-1 -> chain-2 -> chain-3, no deadlock", chain)
    case("a recursive mutex held twice: owner and held 2", recursive)
    case("an error-checking mutex: its owner", errorcheck)
    case("a mutex waited on with a timeout (pthread_mutex_timedlock): its owner", timed)
    case("a priority-inheritance mutex (FUTEX_LOCK_PI): its owner from __lock", pi)
    case("a robust mutex whose owner exited: its heir, owner_died", robust)
    case("a mutex whose owner exited: owner_exited", exited)
    case("an rwlock held for writing: readers and a writer wait for the writer", rwlock)
    case("50 threads on a condition variable: no owner, no false deadlock", condvar)
    case("locks named by their globals (chain_m2, rw; chain_far+0x10000 in .bss past the file), owners say what they hold", named_locks)
    return out


def rename(d, path):
    names = {}
    with open(path) as f:
        for line in f:
            tid, _, name = line.rstrip("\n").partition(" ")
            if tid.isdigit():
                names[int(tid)] = name
    for t in d.get("threads", []):
        t["name"] = names.get(t["tid"], t.get("name"))
        w = t.get("waiting_for")
        if w and w.get("owner_tid") in names and "owner_name" in w:
            w["owner_name"] = names[w["owner_tid"]]


def main():
    args = sys.argv[1:]
    quiet = "--quiet" in args
    args = [a for a in args if a != "--quiet"]
    names = None
    if "--names" in args:
        k = args.index("--names")
        names = args[k + 1]
        del args[k:k + 2]
    label = args[0] if args else "dump"
    try:
        d = json.load(sys.stdin)
    except ValueError:
        d = {}
    if names:
        rename(d, names)
    results = check(d)
    if quiet:
        sys.exit(0 if all(ok for ok, _, _ in results) else 1)
    for ok, what, why in results:
        print("%s - %s: %s%s" % ("ok" if ok else "not ok", label, what,
                                  "" if ok else " (%s)" % why))


main()
