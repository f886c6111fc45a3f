#!/usr/bin/env python3
"""Behavioural checks for the hand-written WAT functions.

Usage:  pip install wasmtime && python3 functions/test/check_wat.py [-v]

Every module in functions/builtin/ and functions/test/ is

  * validated with `wat2wasm` (if it is on PATH),
  * checked to export `memory` and `_start` and to import only the WASI
    preview1 subset the Luge runtime provides (builtins: only
    fd_read / fd_write / proc_exit),
  * run under wasmtime-py's WASI with a given stdin, capturing
    stdout / stderr / exit status / trap.

The I/O-heavy functions are additionally run under a tiny Python
re-implementation of the Luge WASI subset ("stingy WASI") that returns at
most a few bytes per fd_read and accepts at most a few bytes per fd_write,
to exercise the short-read / partial-write loops.

Exit status of this script: 0 if every check passed, 1 otherwise.
"""

import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

import wasmtime as wt

HERE = os.path.dirname(os.path.abspath(__file__))
FUNCS = os.path.dirname(HERE)
BUILTIN = os.path.join(FUNCS, "builtin")
TEST = os.path.join(FUNCS, "test")
VERBOSE = "-v" in sys.argv

WASI = "wasi_snapshot_preview1"
LUGE_WASI = {
    "fd_read", "fd_write", "proc_exit", "args_sizes_get", "args_get",
    "environ_sizes_get", "environ_get", "clock_time_get", "random_get",
}
BASIC_WASI = {"fd_read", "fd_write", "proc_exit"}
# Test modules that legitimately need more than the basic three.
EXTRA_IMPORTS = {
    "args": {"args_sizes_get", "args_get", "environ_sizes_get", "environ_get"},
}

MASK64 = (1 << 64) - 1

# ---------------------------------------------------------------- reporting

failures = []
passes = 0


def check(cond, what, detail=""):
    global passes
    if cond:
        passes += 1
        if VERBOSE:
            print(f"  ok   {what}")
    else:
        failures.append(what)
        print(f"  FAIL {what}" + (f": {detail}" if detail else ""))


# ---------------------------------------------------------------- running

# One engine with epoch interruption (so runaway modules can be stopped),
# one plain engine for clean timings, one with fuel.
def _engine(epoch=False, fuel=False):
    cfg = wt.Config()
    cfg.epoch_interruption = epoch
    cfg.consume_fuel = fuel
    return wt.Engine(cfg)


ENGINES = {"epoch": _engine(epoch=True), "plain": _engine(), "fuel": _engine(fuel=True)}
_modules = {}


def module(name, engine="epoch"):
    """Compile (and cache) functions/{builtin,test}/<name>.wat."""
    key = (name, engine)
    if key not in _modules:
        for d in (BUILTIN, TEST):
            path = os.path.join(d, name + ".wat")
            if os.path.exists(path):
                with open(path) as f:
                    _modules[key] = wt.Module(ENGINES[engine], f.read())
                break
        else:
            raise FileNotFoundError(name)
    return _modules[key]


class Result:
    """Outcome of one run: exit code (None if trapped), trap, output, time."""

    def __init__(self, code, trap, stdout, stderr, secs):
        self.code, self.trap, self.stdout, self.stderr, self.secs = code, trap, stdout, stderr, secs

    @property
    def trap_code(self):
        return getattr(self.trap, "trap_code", None)

    def __repr__(self):
        return (f"Result(code={self.code}, trap={self.trap_code or self.trap!r}, "
                f"stdout={self.stdout[:60]!r}{'...' if len(self.stdout) > 60 else ''}, "
                f"stderr={self.stderr[:80]!r}, {self.secs * 1e3:.2f} ms)")


def _call_start(store, instance, engine_kind, timeout, fuel):
    """Call _start; return (exit code or None, trap or None, seconds)."""
    start = instance.exports(store)["_start"]
    timer = None
    if engine_kind == "epoch":
        store.set_epoch_deadline(1)
        timer = threading.Timer(timeout, ENGINES["epoch"].increment_epoch)
        timer.start()
    elif engine_kind == "fuel":
        store.set_fuel(fuel)
    t0 = time.perf_counter()
    code, trap = 0, None
    try:
        start(store)
    except wt.ExitTrap as e:
        code = e.code
    except wt.Trap as e:
        code, trap = None, e
    except wt.WasmtimeError as e:  # e.g. stack overflow reported as error
        code, trap = None, e
    secs = time.perf_counter() - t0
    if timer:
        timer.cancel()
    return code, trap, secs


def run(name, stdin=b"", argv=None, env=None, engine="epoch", timeout=10.0,
        fuel=10**9, mem_limit=None):
    """Run a module under wasmtime-py's WASI."""
    store = wt.Store(ENGINES[engine])
    if mem_limit is not None:
        store.set_limits(memory_size=mem_limit)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {n: os.path.join(tmp, n) for n in ("in", "out", "err")}
        with open(paths["in"], "wb") as f:
            f.write(stdin)
        cfg = wt.WasiConfig()
        cfg.stdin_file = paths["in"]
        cfg.stdout_file = paths["out"]
        cfg.stderr_file = paths["err"]
        if argv is not None:
            cfg.argv = argv
        if env is not None:
            cfg.env = env
        store.set_wasi(cfg)
        linker = wt.Linker(ENGINES[engine])
        linker.define_wasi()
        inst = linker.instantiate(store, module(name, engine))
        code, trap, secs = _call_start(store, inst, engine, timeout, fuel)
        del inst, store, linker
        with open(paths["out"], "rb") as f:
            out = f.read()
        with open(paths["err"], "rb") as f:
            err = f.read()
    return Result(code, trap, out, err, secs)


class _Exit(Exception):
    def __init__(self, code):
        self.code = code


def run_stingy(name, stdin=b"", max_read=7, max_write=5):
    """Run a module under a minimal Python WASI (fd_read/fd_write/proc_exit)
    that hands out at most `max_read` bytes per read and accepts at most
    `max_write` bytes per write, spread over however many iovecs."""
    eng = ENGINES["plain"]
    store = wt.Store(eng)
    linker = wt.Linker(eng)
    i32 = wt.ValType.i32()
    state = {"in": stdin, "pos": 0, "out": {1: bytearray(), 2: bytearray()}}

    def mem(caller):
        return caller.get("memory")

    def iovecs(caller, iovs, n):
        m = mem(caller)
        raw = m.read(caller, iovs, iovs + 8 * n)
        return [struct.unpack_from("<II", raw, 8 * i) for i in range(n)]

    def fd_read(caller, fd, iovs, n, nread_ptr):
        if fd != 0:
            return 8  # EBADF
        budget, total = max_read, 0
        for ptr, length in iovecs(caller, iovs, n):
            take = min(length, budget, len(state["in"]) - state["pos"])
            if take <= 0:
                break
            chunk = state["in"][state["pos"]:state["pos"] + take]
            mem(caller).write(caller, chunk, ptr)
            state["pos"] += take
            budget -= take
            total += take
        mem(caller).write(caller, struct.pack("<I", total), nread_ptr)
        return 0

    def fd_write(caller, fd, iovs, n, nwritten_ptr):
        if fd not in (1, 2):
            return 8  # EBADF
        budget, total = max_write, 0
        for ptr, length in iovecs(caller, iovs, n):
            take = min(length, budget)
            if take <= 0:
                break
            state["out"][fd] += mem(caller).read(caller, ptr, ptr + take)
            budget -= take
            total += take
        mem(caller).write(caller, struct.pack("<I", total), nwritten_ptr)
        return 0

    def proc_exit(code):
        raise _Exit(code)

    linker.define_func(WASI, "fd_read", wt.FuncType([i32] * 4, [i32]), fd_read, access_caller=True)
    linker.define_func(WASI, "fd_write", wt.FuncType([i32] * 4, [i32]), fd_write, access_caller=True)
    linker.define_func(WASI, "proc_exit", wt.FuncType([i32], []), proc_exit)
    inst = linker.instantiate(store, module(name, "plain"))
    t0 = time.perf_counter()
    code, trap = 0, None
    try:
        inst.exports(store)["_start"](store)
    except _Exit as e:
        code = e.code
    except wt.Trap as e:
        code, trap = None, e
    return Result(code, trap, bytes(state["out"][1]), bytes(state["out"][2]),
                  time.perf_counter() - t0)


# ---------------------------------------------------------------- references

def fib_ref(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def spin_ref(k):
    x = 0
    for _ in range(k):
        x = (x * 6364136223846793005 + 1442695040888963407) & MASK64
        x ^= x >> 33
    return x


# ---------------------------------------------------------------- checks

def check_static():
    print("static: wat2wasm validation, imports, exports")
    wat2wasm = shutil.which("wat2wasm")
    if not wat2wasm:
        print("  (wat2wasm not found; skipping external validation)")
    for d, builtin in ((BUILTIN, True), (TEST, False)):
        for fname in sorted(os.listdir(d)):
            if not fname.endswith(".wat"):
                continue
            name = fname[:-4]
            path = os.path.join(d, fname)
            if wat2wasm:
                with tempfile.TemporaryDirectory() as tmp:
                    p = subprocess.run([wat2wasm, path, "-o", os.path.join(tmp, "m.wasm")],
                                       capture_output=True, text=True)
                check(p.returncode == 0, f"{fname}: wat2wasm validates", p.stderr.strip())
            m = module(name)
            exports = {e.name for e in m.exports}
            check({"memory", "_start"} <= exports, f"{fname}: exports memory and _start",
                  str(exports))
            imports = {(i.module, i.name) for i in m.imports}
            allowed = BASIC_WASI | (set() if builtin else EXTRA_IMPORTS.get(name, set()))
            bad = {i for i in imports if i[0] != WASI or i[1] not in allowed or i[1] not in LUGE_WASI}
            check(not bad, f"{fname}: imports only {sorted(allowed)}", str(sorted(bad)))


def check_noop():
    print("noop")
    r = run("noop", b"ignored input")
    check(r.code == 0 and r.stdout == b"" and r.stderr == b"", "noop: exit 0, no output", repr(r))


def check_echo():
    print("echo")
    rng = random.Random(1234)
    cases = {
        "empty": b"",
        "1 byte": b"\x00",
        "64 KiB exactly": rng.randbytes(65536),
        "100 KiB random": rng.randbytes(100 * 1024),
        "1 MiB + 3 random": rng.randbytes((1 << 20) + 3),
    }
    for what, data in cases.items():
        r = run("echo", data)
        check(r.code == 0 and r.stdout == data and r.stderr == b"",
              f"echo: {what} ({len(data)} B) round-trips", repr(r))
    data = rng.randbytes(3000)
    r = run_stingy("echo", data, max_read=7, max_write=5)
    check(r.code == 0 and r.stdout == data, "echo: short reads / partial writes (stingy WASI)", repr(r))


def check_hello():
    print("hello")
    cases = [
        (b"", b"Hello from Luge!\n"),
        (b"\n", b"Hello from Luge!\n"),
        (b"World", b"Hello, World!\n"),
        (b"World\n", b"Hello, World!\n"),
        (b"World\r\n", b"Hello, World!\n"),
        (b"a b c\n\n", b"Hello, a b c!\n"),
        (b"x" * 5000, b"Hello, " + b"x" * 1024 + b"!\n"),  # name capped at 1024 B
    ]
    for inp, want in cases:
        r = run("hello", inp)
        check(r.code == 0 and r.stdout == want, f"hello: {inp[:20]!r} -> {want[:30]!r}", repr(r))
    r = run_stingy("hello", b"Stingy Runtime\n", max_read=3, max_write=2)
    check(r.code == 0 and r.stdout == b"Hello, Stingy Runtime!\n", "hello: stingy WASI", repr(r))


def check_fib():
    print("fib")
    ok = True
    for n in range(31):
        r = run("fib", f"{n}\n".encode())
        want = f"{fib_ref(n)}\n".encode()
        if not (r.code == 0 and r.stdout == want):
            ok = False
            check(False, f"fib({n})", repr(r))
    check(ok, "fib(0..30) all correct")
    for inp in (b"25", b"  25  ", b"\t25\r\n", b"0025\n"):
        r = run("fib", inp)
        check(r.code == 0 and r.stdout == b"75025\n", f"fib: input {inp!r} accepted", repr(r))
    r = run_stingy("fib", b"  20\n", max_read=1, max_write=1)
    check(r.code == 0 and r.stdout == b"6765\n", "fib: stingy WASI (1-byte reads/writes)", repr(r))
    for inp in (b"", b"\n", b"abc", b"91", b"-1", b"+5", b"1 2", b"12a", b"2.5",
                b"99999999999999999999999", b" " * 300 + b"5"):
        r = run("fib", inp)
        check(r.code == 2 and r.stdout == b"" and b"fib:" in r.stderr,
              f"fib: bad input {inp[:24]!r} -> stderr + exit 2", repr(r))
    # fib(90) is valid but takes forever: must run until the deadline.
    r = run("fib", b"90", timeout=0.2)
    check(r.code is None and r.trap_code == wt.TrapCode.INTERRUPT,
          "fib(90) runs until interrupted (epoch)", repr(r))


def check_spin():
    print("spin")
    for k in (0, 1, 2, 1000, 1_000_000):
        want = f"{spin_ref(k):016x}\n".encode()
        r1 = run("spin", f"{k}\n".encode())
        r2 = run("spin", f"{k}\n".encode())
        check(r1.code == 0 and r1.stdout == want and r2.stdout == want,
              f"spin({k}) = {want.decode().strip()} (deterministic, matches Python)", repr(r1))
    for inp in (b"", b"x", b"1e6", b"-3", b"1000000000000000000"):
        r = run("spin", inp)
        check(r.code == 2 and r.stdout == b"" and b"spin:" in r.stderr,
              f"spin: bad input {inp!r} -> stderr + exit 2", repr(r))
    r = run("spin", b"1000000000000", timeout=0.2)  # 10^12: accepted, stopped by deadline
    check(r.code is None and r.trap_code == wt.TrapCode.INTERRUPT,
          "spin(10^12) runs until interrupted (epoch)", repr(r))


def check_traps():
    print("test modules: traps and limits")
    r = run("loop", timeout=0.2)
    check(r.code is None and r.trap_code == wt.TrapCode.INTERRUPT and 0.15 < r.secs < 2,
          f"loop: stopped by epoch deadline after {r.secs * 1e3:.0f} ms", repr(r))
    r = run("loop", engine="fuel", fuel=1_000_000)
    check(r.code is None and r.trap_code == wt.TrapCode.OUT_OF_FUEL,
          "loop: stopped by fuel", repr(r))
    r = run("clockspin", timeout=0.2)
    check(r.code is None and r.trap_code == wt.TrapCode.INTERRUPT and 0.15 < r.secs < 2,
          f"clockspin: stopped by epoch deadline after {r.secs * 1e3:.0f} ms", repr(r))

    cap = 64 << 20
    r = run("membomb", mem_limit=cap)
    check(r.code is None and r.trap_code == wt.TrapCode.UNREACHABLE,
          "membomb: hits 64 MiB cap, then traps unreachable", repr(r))

    r = run("stackoverflow")
    check(r.code is None and r.trap_code == wt.TrapCode.STACK_OVERFLOW,
          "stackoverflow: stack overflow trap", repr(r))

    r = run("oob")
    check(r.code is None and r.trap_code == wt.TrapCode.MEMORY_OUT_OF_BOUNDS,
          "oob: out-of-bounds memory trap", repr(r))

    r = run("exit3")
    check(r.code == 3 and r.trap is None and r.stdout == b"", "exit3: exit code 3", repr(r))


def check_io_tests():
    print("test modules: I/O")
    r = run("bigout")
    check(r.code == 0 and len(r.stdout) == 64 << 20 and r.stdout.count(b"x") == 64 << 20,
          f"bigout: {len(r.stdout)} bytes of 'x'", repr(r))

    for inp in (b"", b"secret", b"0123456789abcdefTAIL"):
        r = run("leak", inp)
        check(r.code == 0 and r.stdout == b"\0" * 16, f"leak: fresh sandbox with {inp!r} -> 16 zeros",
              repr(r))
    # Same instance twice: the second call must see the first call's bytes,
    # which proves the module would detect a reused sandbox.
    store = wt.Store(ENGINES["plain"])
    linker = wt.Linker(ENGINES["plain"])
    i32 = wt.ValType.i32()
    outs = []
    feed = [b"first-secret-16b", b"second"]

    def fd_read(caller, fd, iovs, n, nread_ptr):
        m = caller.get("memory")
        ptr, length = struct.unpack("<II", m.read(caller, iovs, iovs + 8))
        data = feed[0][:length]
        feed[0] = feed[0][len(data):]
        m.write(caller, data, ptr)
        m.write(caller, struct.pack("<I", len(data)), nread_ptr)
        return 0

    def fd_write(caller, fd, iovs, n, nwritten_ptr):
        m = caller.get("memory")
        ptr, length = struct.unpack("<II", m.read(caller, iovs, iovs + 8))
        outs.append(bytes(m.read(caller, ptr, ptr + length)))
        m.write(caller, struct.pack("<I", length), nwritten_ptr)
        return 0

    linker.define_func(WASI, "fd_read", wt.FuncType([i32] * 4, [i32]), fd_read, access_caller=True)
    linker.define_func(WASI, "fd_write", wt.FuncType([i32] * 4, [i32]), fd_write, access_caller=True)
    linker.define_func(WASI, "proc_exit", wt.FuncType([i32], []), lambda c: None)
    inst = linker.instantiate(store, module("leak", "plain"))
    inst.exports(store)["_start"](store)
    feed.pop(0)
    inst.exports(store)["_start"](store)
    check(outs == [b"\0" * 16, b"first-secret-16b"],
          "leak: a reused instance does leak (the probe works)", repr(outs))

    argv = ["fib", "req-42", "deadline=1700000000123"]
    env = [("LUGE_FUNCTION", "fib"), ("LUGE_REQUEST_ID", "req-42"),
           ("LUGE_DEADLINE_MS", "1700000000123")]
    r = run("args", argv=argv, env=env)
    want = ("\n".join(argv) + "\n\n" + "".join(f"{k}={v}\n" for k, v in env)).encode()
    check(r.code == 0 and r.stdout == want, "args: argv + blank line + environ", repr(r))
    r = run("args", argv=[], env=[])
    check(r.code == 0 and r.stdout == b"\n", "args: empty argv/environ -> single blank line", repr(r))

    for inp, cap, want in ((b"0", None, b"ok\n"), (b"16\n", None, b"ok\n"),
                           (b"100", 1 << 20, b"fail\n"),   # 100 pages > 1 MiB cap
                           (b"15", 1 << 20, b"ok\n"),      # 1 + 15 pages = 1 MiB
                           (b"16", 1 << 20, b"fail\n"),
                           (b"65536", None, b"fail\n"),    # 1 + 65536 pages > 4 GiB
                           (b"4294967297", None, b"fail\n")):
        r = run("grow", inp, mem_limit=cap)
        check(r.code == 0 and r.stdout == want, f"grow: {inp!r} (cap {cap}) -> {want!r}", repr(r))
    r = run("grow", b"lots")
    check(r.code == 2 and b"grow:" in r.stderr, "grow: bad input -> stderr + exit 2", repr(r))


def timings():
    print("timings (best of 5, _start call only; compile/instantiate excluded)")
    rows = []
    for what, name, inp in (("fib(25)", "fib", b"25"), ("fib(30)", "fib", b"30"),
                            ("spin(1e6)", "spin", b"1000000"), ("spin(1e8)", "spin", b"100000000"),
                            ("noop", "noop", b""), ("echo 1 MiB", "echo", b"x" * (1 << 20))):
        for engine in ("plain", "epoch"):
            best = min(run(name, inp, engine=engine, timeout=60).secs for _ in range(5))
            rows.append((what, engine, best))
            print(f"  {what:<12} {engine:<6} {best * 1e3:9.3f} ms")
    return rows


def main():
    try:
        from importlib.metadata import version
        print(f"wasmtime-py {version('wasmtime')}")
    except Exception:
        pass
    check_static()
    check_noop()
    check_echo()
    check_hello()
    check_fib()
    check_spin()
    check_traps()
    check_io_tests()
    timings()
    print(f"\n{passes} checks passed, {len(failures)} failed")
    for f in failures:
        print(f"  FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
