#!/usr/bin/env python3
"""Runs a libFuzzer target over a copy of its seed corpus, for FUZZ_SECONDS (default 45) or a
number of inputs, and reports executions, coverage and crashes. A crash or a hang fails, with
the input that caused it, copied to fuzz-crashes/NAME where it runs (the build directory,
under meson test): to keep under regressions/NAME, where every build then runs it.

    run_fuzzer.py TARGET [--seconds N | --runs N] --seed DIR...
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile


def main():
    p = argparse.ArgumentParser()
    p.add_argument("target")
    p.add_argument("--seconds", type=int, default=int(os.environ.get("FUZZ_SECONDS", "45")))
    p.add_argument("--runs", type=int, default=0, help="a number of inputs instead of a time")
    p.add_argument("--seed", nargs="+", required=True)
    args = p.parse_args()
    name = pathlib.Path(args.target).name
    with tempfile.TemporaryDirectory(prefix=f"monitord-{name}-") as tmp:
        tmp = pathlib.Path(tmp)
        corpus, artifacts = tmp / "corpus", tmp / "artifacts"
        corpus.mkdir()
        artifacts.mkdir()
        seeds = 0
        for d in args.seed:
            for f in pathlib.Path(d).rglob("*"):
                if f.is_file():
                    shutil.copy(f, corpus / f"seed-{seeds}-{f.name}")
                    seeds += 1
        limit = [f"-runs={args.runs}"] if args.runs else [f"-max_total_time={args.seconds}"]
        cmd = [args.target, *limit, "-timeout=10", "-rss_limit_mb=2560", "-print_final_stats=1",
               f"-artifact_prefix={artifacts}/", str(corpus)]
        print(" ".join(cmd), flush=True)
        env = dict(os.environ)
        symbolizer = "/usr/lib/llvm-16/bin/llvm-symbolizer"  # stacks with names (llvm-16)
        if os.path.exists(symbolizer):
            env.setdefault("ASAN_SYMBOLIZER_PATH", symbolizer)
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=env)
        out = r.stderr
        stat = dict(re.findall(r"^stat::(\w+):\s+(\d+)", out, re.M))
        done = re.findall(r"^#(\d+)\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)", out, re.M)
        execs = int(stat.get("number_of_executed_units", 0))
        rate = int(stat.get("average_exec_per_sec", 0))
        seconds = execs / rate if rate else 0
        crashes = sorted(artifacts.iterdir())
        if done:
            _, cov, ft, corp = done[-1]
            print(f"{name}: {execs} executions in {seconds:.0f} s "
                  f"({rate}/s), coverage {cov} edges "
                  f"({ft} features), corpus {corp} inputs from {seeds} seeds, peak RSS "
                  f"{stat.get('peak_rss_mb', '?')} MiB, {len(crashes)} crashes")
        if r.returncode != 0 or crashes:
            print(out[-6000:])
            # The inputs outlive the temporary directory: copied where the test ran (the
            # build directory, under meson test).
            kept = pathlib.Path.cwd() / "fuzz-crashes" / name.removeprefix("fuzz-")
            kept.mkdir(parents=True, exist_ok=True)
            for c in crashes:
                data = c.read_bytes()
                shutil.copy(c, kept / c.name)
                print(f"FAILED: {c.name} ({len(data)} bytes, copied to {kept / c.name}): "
                      f"{data[:512]!r}")
                keep = pathlib.Path(os.environ.get("MESON_SOURCE_ROOT", ".")) / "tests/fuzz" \
                    / "regressions" / name.removeprefix("fuzz-") / c.name
                print(f"keep it as {keep}, fix the bug, and every build runs it from then on")
            sys.exit(1)
        if not done:
            print(out[-3000:])
            print("FAILED: libFuzzer printed no final statistics")
            sys.exit(1)


if __name__ == "__main__":
    main()
