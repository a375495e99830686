"""Pulls the HLO modules out of XLA's own test sources into a directory of .hlo files that
tools/xla_corpus.py runs.

    python tools/xla_test_hlo.py GIT_DIR OUT_DIR [--include REGEX] [--limit N]

GIT_DIR is a git directory of openxla/xla (or a fork: a bare mirror from the `fetch` tool works);
files are read from its HEAD with `git cat-file`, nothing is checked out. XLA's end-to-end tests
(`xla/tests/*.cc`) and pass tests (`xla/service/*_test.cc`, ...) hold their modules in C++ raw
strings (`R"(...)"`, `R"hlo(...)hlo"`); `.hlo` and `.txt` files under `xla/tests/` and
`xla/tools/` are modules as they are. A raw string is kept when it reads as a module (it has an
`ENTRY` computation) and is complete text, not a template: strings with absl::Substitute (`$0`) or
StrFormat (`%s`, `%d`) placeholders, or FileCheck patterns (`[[`), are left out. Identical modules
are written once.

Why a script and not a corpus: XLA's tests are XLA's code and stay out of this repository; this
rebuilds the corpus from any snapshot.
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import re
import subprocess
import sys
from pathlib import Path

log = logging.getLogger("xla_test_hlo")

#: which files of the tree are read (the default: end-to-end tests, pass tests, test data)
#: and the pass tests whose modules are plain computations (not sharding, layout, scheduling or
#: verifier-negative tests, whose modules XLA:CPU mostly does not run as written)
DEFAULT_INCLUDE = (r"^xla/tests/[^/]*\.(cc|hlo|txt)$|^xla/tools/.*\.(hlo|txt)$|"
                   r"^xla/service/(dynamic_padder|while_loop_simplifier|call_inliner|gather_expander|"
                   r"scatter_expander|triangular_solve_expander|cholesky_expander|sort_simplifier|"
                   r"reduce_decomposer)_test\.cc$|"
                   r"^xla/hlo/transforms/simplifiers/(algebraic_simplifier|hlo_constant_folding|reshape_mover|"
                   r"dot_merger|tuple_simplifier|zero_sized_hlo_elimination)_test\.cc$")
RAW_STRING = re.compile(r'R"([A-Za-z_]{0,16})\((.*?)\)\1"', re.S)
TEMPLATE = re.compile(r"\$\d|%[sdi]\b|%[0-9]*d|\[\[|\{\{")
ENTRY = re.compile(r"^\s*ENTRY\b", re.M)


def _git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True).stdout


def tree_files(git_dir: Path, include: str) -> list[str]:
    names = _git(git_dir, "ls-tree", "-r", "--name-only", "HEAD").decode().splitlines()
    pattern = re.compile(include)
    return sorted(n for n in names if pattern.search(n))


def modules_of(path: str, text: str) -> list[str]:
    """The complete HLO modules a source file holds."""
    if not path.endswith(".cc"):
        return [text] if ENTRY.search(text) else []
    out = []
    for m in RAW_STRING.finditer(text):
        body = m.group(2)
        if ENTRY.search(body) and not TEMPLATE.search(body):
            out.append(body.strip() + "\n")
    return out


def extract(git_dir: Path, out_dir: Path, include: str, limit: int | None) -> dict[str, int]:
    out_dir.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    counts = {"files": 0, "raw": 0, "written": 0, "duplicates": 0}
    for path in tree_files(git_dir, include):
        counts["files"] += 1
        try:
            text = _git(git_dir, "cat-file", "-p", f"HEAD:{path}").decode("utf-8", "replace")
        except subprocess.CalledProcessError:  # a snapshot may list large files it does not hold
            log.info("%s: not in the snapshot, skipped", path)
            continue
        stem = re.sub(r"[^A-Za-z0-9]+", "_", path.rsplit(".", 1)[0])
        for k, module in enumerate(modules_of(path, text)):
            counts["raw"] += 1
            digest = hashlib.sha256(module.encode()).hexdigest()
            if digest in seen:
                counts["duplicates"] += 1
                continue
            seen.add(digest)
            (out_dir / f"{stem}_{k}.hlo").write_text(module)
            counts["written"] += 1
            if limit is not None and counts["written"] >= limit:
                return counts
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir", type=Path)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--include", default=DEFAULT_INCLUDE, help="regular expression over tree paths")
    ap.add_argument("--limit", type=int, help="stop after this many modules")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    counts = extract(args.git_dir, args.out_dir, args.include, args.limit)
    log.info("%d files read, %d modules found, %d written (%d duplicates)", counts["files"], counts["raw"],
             counts["written"], counts["duplicates"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
