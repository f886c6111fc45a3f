#!/usr/bin/env python3
"""Run Luge's C functions as wasm32-wasi modules under wasmtime-py (dev-time check).

    run_wasm.py run <module.wasm> <input> <output>     run one request; exits with the
                                                        module's exit code, stderr passes through
    run_wasm.py check <build-dir> [function ...]        check every function (default: all
                                                        modules in <build-dir>/wasm):
      * the module imports only wasi_snapshot_preview1 fd_read, fd_write and proc_exit and
        declares a linear memory of at most 16 MiB;
      * for every <build-dir>/inputs/<fn>-<size>.in the wasm response equals
        <build-dir>/expected/<fn>-<size>.out (the native response) byte for byte;
      * for every <build-dir>/bad/<fn>-<kind>.in the module exits with code 2 and writes
        nothing on stdout.

Needs wasmtime-py (`python3 -m venv .venv && .venv/bin/pip install wasmtime`). The CI
version of this check is a Rust test on Luge's own runtime reading the same
build/{wasm,inputs,expected,bad} layout (see the Makefile).
"""

import os
import sys
import tempfile
import time

try:
    import wasmtime
except ImportError:  # pragma: no cover
    sys.exit("run_wasm.py: needs wasmtime-py (python3 -m venv .venv && .venv/bin/pip install wasmtime)")

ALLOWED_IMPORTS = {"fd_read", "fd_write", "proc_exit"}
MAX_MEMORY_PAGES = 256  # 16 MiB


def make_engine():
    config = wasmtime.Config()
    config.cranelift_opt_level = "speed"
    return wasmtime.Engine(config)


def run_module(engine, module, input_path, output_path, stderr_path=None):
    """Runs `module` with stdin from input_path and stdout to output_path; returns the exit
    code (0 when _start returns normally)."""
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    store = wasmtime.Store(engine)
    wasi = wasmtime.WasiConfig()
    wasi.argv = ["function"]
    wasi.stdin_file = input_path
    wasi.stdout_file = output_path
    if stderr_path is None:
        wasi.inherit_stderr()
    else:
        wasi.stderr_file = stderr_path
    store.set_wasi(wasi)
    instance = linker.instantiate(store, module)
    start = instance.exports(store)["_start"]
    try:
        start(store)
    except wasmtime.ExitTrap as e:
        return e.code
    return 0


def module_problems(module):
    """Import and memory rules every Luge function module must follow."""
    problems = []
    for imp in module.imports:
        if imp.module != "wasi_snapshot_preview1" or imp.name not in ALLOWED_IMPORTS:
            problems.append(f"imports {imp.module}.{imp.name}")
    for exp in module.exports:
        ty = exp.type
        if isinstance(ty, wasmtime.MemoryType):
            limits = ty.limits
            if limits.max is None or limits.max > MAX_MEMORY_PAGES:
                problems.append(f"memory maximum {limits.max} pages (want <= {MAX_MEMORY_PAGES})")
    return problems


def check(build, functions):
    engine = make_engine()
    if not functions:
        functions = sorted(f[:-5] for f in os.listdir(os.path.join(build, "wasm"))
                           if f.endswith(".wasm"))
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "out")
        err_path = os.path.join(tmp, "err")
        for fn in functions:
            t0 = time.perf_counter()
            module = wasmtime.Module.from_file(engine, os.path.join(build, "wasm", fn + ".wasm"))
            compile_s = time.perf_counter() - t0
            for p in module_problems(module):
                print(f"{fn}: FAIL: {p}")
                failures += 1
            inputs = sorted(f for f in os.listdir(os.path.join(build, "inputs"))
                            if f.startswith(fn + "-") and f.endswith(".in")
                            and "-" not in f[len(fn) + 1:-3])
            results = []
            for name in inputs:
                size = name[len(fn) + 1:-3]
                expected = os.path.join(build, "expected", f"{fn}-{size}.out")
                t0 = time.perf_counter()
                code = run_module(engine, module, os.path.join(build, "inputs", name), out_path,
                                  err_path)
                run_ms = (time.perf_counter() - t0) * 1e3
                with open(out_path, "rb") as f:
                    got = f.read()
                with open(expected, "rb") as f:
                    want = f.read()
                if code != 0 or got != want:
                    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                                 min(len(got), len(want)))
                    with open(err_path, "rb") as f:
                        err = f.read().decode(errors="replace").strip()
                    print(f"{fn}-{size}: FAIL: exit {code}, {len(got)} bytes vs {len(want)} "
                          f"native, first difference at byte {first} {err}")
                    failures += 1
                else:
                    results.append(f"{size} {len(got)} B ({run_ms:.1f} ms)")
            bad_dir = os.path.join(build, "bad")
            bads = sorted(f for f in os.listdir(bad_dir) if f.startswith(fn + "-")
                          and f.endswith(".in") and "-" not in f[len(fn) + 1:-3]) \
                if os.path.isdir(bad_dir) else []
            for name in bads:
                code = run_module(engine, module, os.path.join(bad_dir, name), out_path, err_path)
                with open(out_path, "rb") as f:
                    got = f.read()
                if code != 2 or got:
                    print(f"{fn} {name}: FAIL: exit {code} (want 2), {len(got)} stdout bytes")
                    failures += 1
            print(f"{fn}: compiled in {compile_s * 1e3:.0f} ms; wasm == native for "
                  f"{', '.join(results) or 'nothing'}; {len(bads)} bad inputs exit 2")
    if failures:
        print(f"check-wasm: {failures} FAILURES")
        return 1
    print(f"check-wasm: all {len(functions)} functions byte-equal to native")
    return 0


def main(argv):
    if len(argv) == 5 and argv[1] == "run":
        engine = make_engine()
        module = wasmtime.Module.from_file(engine, argv[2])
        return run_module(engine, module, argv[3], argv[4])
    if len(argv) >= 3 and argv[1] == "check":
        return check(argv[2], argv[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
