#!/usr/bin/env python3
"""docs/architecture.md is true to the tree: every source file is named in it or in its folder's
README.md, every source folder is named in it, and every `aoc` subcommand is named in it.
tests/architecture_test.py AOC_BINARY"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = ["sim", "compiler", "models", "runtime", "bench", "python"]


def main():
    doc = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    missing = []
    for layer in LAYERS:
        for folder, _, files in os.walk(os.path.join(ROOT, layer)):
            rel_folder = os.path.relpath(folder, ROOT)
            if "__pycache__" in rel_folder:
                continue
            in_layer_folder = os.path.relpath(folder, os.path.join(ROOT, layer))
            if rel_folder not in doc and "`" + in_layer_folder + "/`" not in doc:
                if any(f.endswith((".cpp", ".hpp", ".py", ".cu")) for f in files):
                    missing.append(f"folder {rel_folder}/")
            readme_path = os.path.join(folder, "README.md")
            readme = open(readme_path, encoding="utf-8").read() if os.path.exists(readme_path) else ""
            for f in sorted(files):
                if not f.endswith((".cpp", ".hpp", ".py", ".cu")):
                    continue
                stem = os.path.splitext(f)[0]
                in_layer = os.path.relpath(os.path.join(folder, stem), os.path.join(ROOT, layer))
                # named as the file, its stem with .hpp/.cpp, or its path in the layer
                names = {f, stem + ".hpp/.cpp", stem + ".cpp", stem + ".hpp", in_layer, in_layer + ".hpp/.cpp"}
                if not any(re.search(r"(?<![\w/])" + re.escape(n) + r"(?![\w])", doc) or n in readme for n in names):
                    missing.append(os.path.join(rel_folder, f))
    helptext = subprocess.run([sys.argv[1], "--help"], capture_output=True, text=True).stdout
    section = helptext.split("Subcommands:")[-1].split("Examples:")[0]
    commands = re.findall(r"^\s{2}([a-z][a-z0-9-]*)\s", section, re.M)
    for c in commands:
        if not re.search(r"aoc " + re.escape(c) + r"\b|\|\s*" + re.escape(c) + r"\b|\b" + re.escape(c) + r"\s*\|", doc):
            missing.append(f"subcommand aoc {c}")
    if not commands:
        missing.append("no subcommands read from `aoc --help`")
    for m in missing:
        print(f"docs/architecture.md: names nowhere {m}")
    print(f"checked {len(commands)} subcommands; {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
