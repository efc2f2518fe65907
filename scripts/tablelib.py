"""What the scripts that print the docs' tables share: number formats, running aoc with every command
kept (so that the docs can list them), and replacing a marked section of a markdown file atomically.
Python 3 standard library only."""
import contextlib
import io
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def si(v, unit):
    """Three significant digits with an SI prefix: "1.23 µJ"."""
    if v == 0:
        return f"0 {unit}"
    prefixes = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""), (1e-3, "m"), (1e-6, "µ"),
                (1e-9, "n"), (1e-12, "p"), (1e-15, "f")]
    for scale, p in prefixes:
        if abs(v) >= scale:
            return f"{v / scale:.3g} {p}{unit}"
    return f"{v:.3g} {unit}"


def g(v):
    return f"{v:.3g}"


def run(cmd, shown, name):
    """Runs cmd in the project root, appends it to shown, returns its stdout; a failure exits naming it."""
    shown.append(" ".join(cmd))
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{name}: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


def print_or_write(print_tables, path, name):
    """Prints what print_tables() prints, or with path, puts it between the markers
    <!-- NAME begin --> and <!-- NAME end --> of that file (through a temporary file and a rename)."""
    if not path:
        print_tables()
        return
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_tables()
    begin, end = f"<!-- {name} begin -->\n", f"<!-- {name} end -->"
    with open(path) as f:
        doc = f.read()
    if begin not in doc or end not in doc:
        sys.exit(f"{name}: {path}: the markers {begin.strip()} and {end} are missing")
    head, rest = doc.split(begin, 1)
    tail = rest.split(end, 1)[1]
    with open(path + ".tmp", "w") as f:
        f.write(head + begin + out.getvalue() + end + tail)
    os.replace(path + ".tmp", path)


def model_kind(sc):
    """A trained model's scenario in words: its kind and width, and what differs from the defaults
    (the training solve, the transition, hardware-aware training)."""
    m, t = sc["model"], sc["train"]
    if m.get("kind") == "aoc-ssm":
        kind = f"AOC-native implicit SSM, {m.get('d_model', 16)} variables"
    else:
        kind = ("implicit" if m["implicit"] else "explicit") + f" Mamba2, d_model {m.get('d_model', 32)}"
        if m.get("n_layer", 1) != 1:
            kind += f", {m['n_layer']} layers"
        if m.get("transition", "exp") != "exp":
            kind += f", {m['transition']} transitions (can be negative)"
    if m.get("kind") == "aoc-ssm" or m.get("implicit"):
        if (t.get("solve_max", 16), t.get("solve_tol", 0.05)) != (16, 0.05):
            kind += f", training solve <= {t.get('solve_max', 16)} steps at tol {t.get('solve_tol', 0.05)}"
    if "hardware_aware" in t:
        kind += ", hardware-aware"
    return kind
