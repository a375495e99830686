"""Runs AWS's public NKI tests and example programs, unchanged, against this package.

    python tools/aws_nki_corpus.py GIT_DIR OUT_DIR [--timeout S] [--only REGEX]

GIT_DIR is a git directory of aws-neuron/aws-neuron-sdk (a bare mirror from the `fetch` tool
works); the files are read from its HEAD with `git show` and written under OUT_DIR, nothing is
checked out and nothing is copied into this repository (they are AWS's code). Three groups:

* `nki/test/*.py`: AWS's unit tests of the NKI API (beta 1, `neuronxcc.nki`), run with pytest;
  one row per test case (pytest's JUnit XML).
* `nki/examples/**.py` and `nki/deep-dives/src/**.py` that do something when run (a
  `__main__` block or top-level statements besides imports and definitions): the tutorial
  programs (NumPy, JAX and torch_xla front ends), each run from its own directory as a script
  on the neuron device (`PJRT_DEVICE=NEURON`; JAX finds the plugin by itself). A program passes
  when it exits 0 and prints no line saying its results differ ("differ", "mismatch",
  "pass? False", "matches? False").

Every program runs in its own process with a timeout and a private compile cache under OUT_DIR.
The report (OUT_DIR/report.md and report.json) is rewritten after every program, so a killed run
keeps what it measured. benchmarks/aws_nki_corpus.md has the results and what each failure is.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

#: Files of the SDK repository that are run (tests) or executed as programs (the rest).
TESTS = re.compile(r"^nki/test/test_[^/]*\.py$")
PROGRAMS = re.compile(r"^nki/(examples|deep-dives/src)/.*\.py$")
#: A line a tutorial program prints when its result does not match its reference.
DIFFERS = re.compile(r"\bdiffer\b|\bmismatch|pass\? False|matches\? False", re.I)


def _git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True,
                          capture_output=True).stdout


def extract(git_dir: Path, out: Path) -> list[str]:
    """Writes the tests' and programs' files under ``out``; returns their repository paths."""
    names = _git(git_dir, "ls-tree", "-r", "--name-only", "HEAD").decode().splitlines()
    wanted = [n for n in names if TESTS.search(n) or PROGRAMS.search(n)]
    for name in wanted:
        dest = out / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(_git(git_dir, "show", f"HEAD:{name}"))
    return wanted


def _env(out: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["NEURON_COMPILE_CACHE_URL"] = str(out / "neff-cache")
    env["PJRT_DEVICE"] = "NEURON"
    env.pop("JAX_PLATFORMS", None)
    return env


def run_tests(out: Path, timeout: float) -> list[dict]:
    """pytest on AWS's test directory; one row per test case."""
    xml = out / "tests.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
           str(out / "nki" / "test")]
    try:
        subprocess.run(cmd, cwd=out / "nki" / "test", env=_env(out), capture_output=True,
                       timeout=timeout)
    except subprocess.TimeoutExpired:
        return [{"name": "nki/test (all)", "outcome": "timeout", "detail": f"{timeout:.0f} s"}]
    rows = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        outcome, detail = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                detail = (node.get("message") or "").splitlines()[0][:200] if node.get("message") \
                    else ""
                break
        rows.append({"name": f"{case.get('classname')}::{case.get('name')}", "outcome": outcome,
                     "detail": detail})
    return rows


def run_program(out: Path, name: str, timeout: float) -> dict:
    """One tutorial program as a script from its directory."""
    path = out / name
    t0 = time.monotonic()
    try:
        done = subprocess.run([sys.executable, path.name], cwd=path.parent, env=_env(out),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"name": name, "outcome": "timeout", "detail": f"{timeout:.0f} s"}
    seconds = round(time.monotonic() - t0, 1)
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    differs = [ln.strip() for ln in done.stdout.splitlines() if DIFFERS.search(ln)]
    if done.returncode != 0:
        return {"name": name, "outcome": "failed", "seconds": seconds,
                "detail": (lines[-1] if lines else f"exit {done.returncode}")[:200]}
    if differs:
        return {"name": name, "outcome": "differs", "seconds": seconds, "detail": differs[0][:200]}
    return {"name": name, "outcome": "passed", "seconds": seconds, "detail": ""}


def is_program(source: str) -> bool:
    """Whether running the file does something: a statement at top level other than imports,
    definitions and assignments (a ``__main__`` block, a call). A file Python can not parse is
    run too, so that the report shows its error."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True
    quiet = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
             ast.Assign, ast.AnnAssign)
    return any(not isinstance(st, quiet) and not (isinstance(st, ast.Expr)
                                                 and isinstance(st.value, ast.Constant))
               for st in tree.body)


def write_report(out: Path, rows: list[dict]) -> None:
    (out / "report.json").write_text(json.dumps(rows, indent=1))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    text = ["# AWS's NKI tests and programs on neuron-customcall", "",
            ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), "",
            "| name | outcome | detail |", "| --- | --- | --- |"]
    text += [f"| {r['name']} | {r['outcome']} | {r.get('detail', '').replace('|', '/')} |"
             for r in rows]
    (out / "report.md").write_text("\n".join(text) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per program")
    ap.add_argument("--only", default="", help="regex: run only the files it matches")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    names = [n for n in extract(args.git_dir, args.out) if re.search(args.only, n)]
    rows: list[dict] = []
    if any(TESTS.search(n) for n in names):
        rows += run_tests(args.out, args.timeout * 4)
        write_report(args.out, rows)
    for name in sorted(n for n in names if PROGRAMS.search(n)):
        if not is_program((args.out / name).read_text(errors="replace")):
            continue  # a module of kernels that the programs import
        rows.append(run_program(args.out, name, args.timeout))
        write_report(args.out, rows)
        print(f"{rows[-1]['outcome']:8s} {name}", flush=True)
    write_report(args.out, rows)
    print(f"report: {args.out / 'report.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
