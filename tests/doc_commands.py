#!/usr/bin/python3
"""Every command README.md and docs/*.md show runs as written and prints what they show (issue 16).

    tests/doc_commands.py --aoc build/aoc FILE.md...     run each file's commands (one ctest per file)
    tests/doc_commands.py --aoc build/aoc --list FILE.md  what would run, and what is skipped and why

What counts as a command, in a fenced block (``` with no language, sh, bash or console):
  - a line `$ CMD`; the lines after it, up to the next `$` line or the block's end, are its output;
  - in a block without `$` lines, a line whose first word is a program (aoc, build/aoc, make, ctest,
    cmake, mpirun, export, python3, scripts/...); other lines are illustrations (errors, IR, tables).
A ```python block runs in one Python scope per file (in document order with the shell commands), so
later blocks see earlier ones' names, as a reader's session would.

How each file runs: in a fresh scratch folder holding links to the repository's data folders and
to the build (build/aoc, build/python), with `aoc` on PATH as the build's binary, so relative paths
resolve as in the repository's root and nothing is written there. Placeholders the docs use for
values: `TMP` (a scratch folder) and `--seed S` (the docs say S = 1..4; run with 1).

What it checks: each command exits 0; for a `$` command with output shown, every shown line appears
in the real output, in order, with numbers masked (timings vary), `...` standing for any lines; any
16-hex-digit digest shown must be printed exactly (the same seed gives the same bits). Inline code
`aoc SUB ...` in prose and the examples of `aoc SUB --help` are checked to name a real subcommand and
real flags.

Commands not run (SKIPS below) say why; a new command in the docs runs unless it matches one.
Exit: 0 all passed, 1 a failure (each named with the file and line), 77 nothing to run.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
LINKED = ("tests", "scenarios", "scripts", "models", "bench", "docs", "python", "sim", "compiler", "runtime",
          "CMakeLists.txt", "Makefile", "README.md", "cmake")
PROGRAMS = {"aoc", "build/aoc", "make", "ctest", "cmake", "mpirun", "export", "python3", "/usr/bin/python3"}

# (pattern, reason): commands the docs show that this test does not run.
SKIPS = [
    (r"^make test\b", "the test suite itself: CI runs `make test` on a clean clone (this test is one of its tests)"),
    (r"^ctest\b", "the test suite itself"),
    (r"build-asan", "the sanitizer build (docs/reliability.md): a second full build, run by hand"),
    (r"^scripts/gpu-check\b", "needs an NVIDIA GPU (scripts/gpu-check runs the CUDA checks there)"),
    (r"--backends? \S*cuda", "needs an NVIDIA GPU: the [cuda] tests cover it where one exists"),
    (r"^(build/)?aoc bench\b", "timings, minutes on 2 cores: `make bench`; bench/ and the bench tests check its cells"),
    (r"^scripts/(train-vs-torch|scale-token-rate)\b", "timings, minutes on 2 cores (docs/bench.md)"),
    (r"^build/aoc retina eval .* --set energy\.photon_budget\.photons_per_sample=",
     "docs/retina.md's aoc-scale rows again at the photons 8 bits need: the rows above's commands but for the --set, "
     "another 4 minutes of a test that already takes 7 (scripts/retina-table reruns them)"),
    (r"^scripts/dt-yaml-to-json \.\./aoc/", "needs a checkout of the twin (microsoft/aoc) beside this one, and PyYAML"),
]
# `make demo` is install-deps, the build (done: this test runs from it), then scripts/demo.
MAPPED = [(r"^make demo$", "scripts/demo build/aoc")]
SUBSTITUTIONS = [(r"--seed S\b", "--seed 1")]


def is_command(line):
    word = line.split(" ", 1)[0]
    return word in PROGRAMS or word.startswith("scripts/")


def strip_comment(cmd):
    """The command without a trailing `# comment` (a # that starts a shell word)."""
    out = []
    for word in re.split(r"(\s+)", cmd):
        if word.startswith("#") and (not out or out[-1].isspace()):
            break
        out.append(word)
    return "".join(out).strip()


class Step:
    def __init__(self, kind, text, line, output=None):
        self.kind, self.text, self.line, self.output = kind, text, line, output


def steps_of(path):
    """The file's commands and Python blocks in document order."""
    lines = open(path, encoding="utf-8").read().split("\n")
    steps, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[start:j]
        while any(b.endswith("\\") for b in body):  # join `\` continuations into one line
            k = next(n for n, b in enumerate(body) if b.endswith("\\"))
            body[k:k + 2] = [body[k][:-1].rstrip() + " " + (body[k + 1].strip() if k + 1 < len(body) else "")]
        if lang == "python":
            steps.append(Step("python", "\n".join(body), start))
        elif lang in ("", "sh", "bash", "console"):
            if any(b.startswith("$ ") for b in body):
                k = 0
                while k < len(body):
                    if body[k].startswith("$ "):
                        out = []
                        n = k + 1
                        while n < len(body) and not body[n].startswith("$ "):
                            out.append(body[n])
                            n += 1
                        steps.append(Step("shell", strip_comment(body[k][2:]), start + k + 1, out))
                        k = n
                    else:
                        k += 1
            else:
                for k, b in enumerate(body):
                    if is_command(b.strip()):
                        steps.append(Step("shell", strip_comment(b.strip()), start + k + 1))
        i = j + 1
    return steps


def skip_reason(cmd, have_gpu):
    for pattern, reason in SKIPS:
        if re.search(pattern, cmd):
            if "GPU" in reason and have_gpu:
                continue
            return reason
    return None


NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
DIGEST = re.compile(r"\b[0-9a-f]{16}\b")


def masked(line):
    return " ".join(NUMBER.sub("#", line).split())


def output_problems(shown, actual):
    """Shown lines that the real output lacks (in order, numbers masked), and missing digests."""
    real = [masked(a) for a in actual.split("\n") if a.strip()]
    problems, pos = [], 0
    for s in shown:
        if not s.strip() or s.strip() in ("...", "…"):
            continue
        want = masked(s)
        k = pos
        while k < len(real) and real[k] != want:
            k += 1
        if k == len(real):
            problems.append(f"shown line not printed (numbers masked): {s.strip()}")
        else:
            pos = k + 1
    for d in DIGEST.findall("\n".join(shown)):
        if d not in actual:
            problems.append(f"digest {d} not printed (the same seed must give the same bits)")
    return problems


def scratch_for(build):
    d = tempfile.mkdtemp(prefix="aoc-docs-")
    for name in LINKED:
        if os.path.exists(os.path.join(ROOT, name)):
            os.symlink(os.path.join(ROOT, name), os.path.join(d, name))
    os.symlink(os.path.abspath(build), os.path.join(d, "build"))
    os.makedirs(os.path.join(d, "bin"))
    os.symlink(os.path.abspath(os.path.join(build, "aoc")), os.path.join(d, "bin", "aoc"))
    os.makedirs(os.path.join(d, "TMP"))
    return d


def prepare(cmd, scratch):
    for pattern, value in SUBSTITUTIONS + MAPPED:
        cmd = re.sub(pattern, value, cmd)
    cmd = re.sub(r"(?<![\w/])TMP/", scratch + "/TMP/", cmd)
    # As root OpenMPI refuses to start without --allow-run-as-root; the docs say so next to mpirun.
    if cmd.startswith("mpirun ") and os.geteuid() == 0 and "--allow-run-as-root" not in cmd:
        cmd = "mpirun --allow-run-as-root --oversubscribe " + cmd[len("mpirun "):]
    return cmd


def run_file(path, build, have_gpu, list_only):
    rel = os.path.relpath(path, ROOT)
    steps = steps_of(path)
    scratch = scratch_for(build)
    env = dict(os.environ)
    env["PATH"] = os.path.join(scratch, "bin") + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.path.join(scratch, "build", "python")
    env.setdefault("OMP_NUM_THREADS", "1")
    scope, failures, ran, skipped = {}, [], 0, 0
    old_cwd, old_path = os.getcwd(), list(sys.path)
    os.chdir(scratch)
    sys.path.insert(0, env["PYTHONPATH"])
    try:
        for st in steps:
            where = f"{rel}:{st.line}"
            if st.kind == "python":
                if not os.path.isdir(os.path.join(build, "python", "aocsim")):
                    skipped += 1
                    print(f"{where}: skipped (the Python package is not built: pybind11 or python3-dev missing)")
                    continue
                if list_only:
                    print(f"{where}: run python block ({st.text.count(chr(10)) + 1} lines)")
                    continue
                t = time.time()
                try:
                    exec(compile(st.text, where, "exec"), scope)
                    ran += 1
                    print(f"{where}: ok ({time.time() - t:.1f} s) python block", flush=True)
                except Exception:
                    failures.append(f"{where}: the python block raised:\n{traceback.format_exc()}")
                    print(failures[-1], flush=True)
                continue
            if st.text.startswith("export "):
                name, _, value = st.text[len("export "):].partition("=")
                env[name] = os.path.expandvars(value.replace("$PWD", scratch))
                continue
            reason = skip_reason(st.text, have_gpu)
            if reason:
                skipped += 1
                print(f"{where}: skipped ({reason}): {st.text}")
                continue
            if list_only:
                print(f"{where}: run: {st.text}")
                continue
            cmd = prepare(st.text, scratch)
            t = time.time()
            p = subprocess.run(["bash", "-c", cmd], cwd=scratch, env=env, capture_output=True, text=True, timeout=900)
            ran += 1
            out = (p.stdout + p.stderr).replace(scratch + "/", "")  # paths as the docs show them
            problems = [] if p.returncode == 0 else [f"exit {p.returncode}"]
            if st.output:
                problems += output_problems(st.output, out)
            status = "ok" if not problems else "FAILED"
            print(f"{where}: {status} ({time.time() - t:.1f} s) {st.text}", flush=True)
            if problems:
                tail = "\n".join(out.rstrip().split("\n")[-15:])
                failures.append(f"{where}: {st.text}\n  " + "\n  ".join(problems) + f"\n  output (last lines):\n{tail}")
    finally:
        os.chdir(old_cwd)
        sys.path[:] = old_path
        shutil.rmtree(scratch, ignore_errors=True)
    return failures, ran, skipped


# ---- inline code and --help examples: a real subcommand, real flags ----

def help_text(aoc, words):
    p = subprocess.run([aoc] + words + ["--help"], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def subcommands(aoc, words, cache):
    """The subcommands `aoc WORDS --help` lists."""
    key = ("subs",) + tuple(words)
    if key not in cache:
        text = help_text(aoc, words)[1]
        part = text.split("Subcommands:\n", 1)[1].split("\n\n", 1)[0] if "Subcommands:\n" in text else ""
        cache[key] = re.findall(r"^  ([a-z][\w-]*)\s", part, flags=re.M)
    return cache[key]


def subcommand_words(aoc, cmd, cache):
    """['hw', 'show'] style: the subcommand path a command names."""
    path = []
    for w in cmd.split()[1:]:
        if w not in subcommands(aoc, path, cache):
            break
        path.append(w)
    return path


def flag_problems(aoc, cmd, cache):
    words = cmd.split()
    if len(words) > 1 and (re.fullmatch(r"[A-Z][A-Z_]*", words[1]) or not re.fullmatch(r"-.*|[a-z][\w-]*", words[1])):
        return []  # `aoc COMMAND --help` (a placeholder) or prose (`aoc sweep: with MPI`)
    sub = subcommand_words(aoc, cmd, cache)
    if not sub and len(words) > 1 and not words[1].startswith("-"):
        return [f"`{cmd}`: no such subcommand"]
    key = " ".join(sub)
    if key not in cache:
        cache[key] = help_text(aoc, sub)[1]
    problems = []
    for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", cmd):
        if not re.search(re.escape(flag) + r"(?![\w-])", cache[key]):
            problems.append(f"`{cmd}`: aoc {key} has no flag {flag}")
    return problems


def inline_commands(path):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    out = []
    for m in re.finditer(r"`((?:build/)?aoc [^`]+)`", text):
        line = text.count("\n", 0, m.start()) + 1
        out.append((line, m.group(1).replace("\\|", "|")))
    return out


def help_examples(aoc):
    """The example lines of `aoc --help` and of each subcommand's help."""
    cache, paths, found = {}, [[]], []
    for path in paths:
        paths += [path + [s] for s in subcommands(aoc, path, cache)]
    for sub in paths:
        _, text = help_text(aoc, sub)
        for block in re.findall(r"Examples?:\n((?:  .*\n?)+)", text):
            for line in block.split("\n"):
                line = line.strip()
                if line.startswith("aoc "):  # the example, then (after two spaces) what it does
                    found.append((" ".join(["aoc"] + sub + ["--help"]), re.split(r"\s{2,}", strip_comment(line))[0]))
    return found


def lint(aoc, files, include_help):
    cache, failures, n = {}, [], 0
    items = []
    for f in files:
        items += [(f"{os.path.relpath(f, ROOT)}:{line}", cmd) for line, cmd in inline_commands(f)]
    if include_help:
        items += help_examples(aoc)
    for where, text in items:
        for cmd in re.split(r"\s*(?:&&|;|\|)\s*", " ".join(text.split())):
            cmd = re.sub(r"^build/aoc\b", "aoc", cmd)
            if not cmd.startswith("aoc "):
                continue
            n += 1
            failures += [f"{where}: {p}" for p in flag_problems(aoc, cmd, cache)]
    return failures, n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aoc", required=True, help="the aoc binary of the build (its folder is the build)")
    ap.add_argument("--list", action="store_true", help="print what would run and what is skipped, run nothing")
    ap.add_argument("--help-examples", action="store_true", help="also check the examples of every --help")
    ap.add_argument("files", nargs="*", help="Markdown files (default: README.md and docs/*.md)")
    a = ap.parse_args()
    aoc = os.path.abspath(a.aoc)
    build = os.path.dirname(aoc)
    files = [os.path.abspath(f) for f in a.files] or [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
    have_gpu = os.path.exists("/dev/nvidia0") and shutil.which("nvidia-smi") is not None
    failures, ran, skipped = [], 0, 0
    for f in files:
        fl, r, s = run_file(f, build, have_gpu, a.list)
        failures += fl
        ran += r
        skipped += s
    lint_fail, linted = ([], 0) if a.list else lint(aoc, files, a.help_examples)
    failures += lint_fail
    print(f"\n{ran} command(s) and python block(s) run, {skipped} skipped (reasons above); "
          f"{linted} inline command(s) and help example(s) checked for real subcommands and flags")
    if failures:
        print(f"\n{len(failures)} failure(s):\n" + "\n\n".join(failures))
        return 1
    return 0 if ran or linted or a.list else 77


if __name__ == "__main__":
    sys.exit(main())
