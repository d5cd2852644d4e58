"""Checks .dockerignore against the checkout: every path git ignores (build
trees, logs) is left out of the image, and no tracked file is.
    dockerignore_check.py ROOT   (prints what is wrong, exit 1)"""
import re
import subprocess
import sys


def pattern_regex(pattern):
    # Docker's rules: a pattern matches a path or any directory above it;
    # ** spans directories, * and ? stay within one.
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + "(?:/.*)?$")


def rules(path):
    result = []
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        result.append((keep, pattern_regex(line.lstrip("!").strip("/"))))
    return result


def excluded(path, rules):
    verdict = False
    for keep, regex in rules:
        if regex.match(path):
            verdict = not keep
    return verdict


def main(root):
    rs = rules(root + "/.dockerignore")

    def git(*args):
        return subprocess.run(["git", "-C", root] + list(args), check=True,
                              capture_output=True, text=True).stdout.split("\0")

    ignored = [line[3:].rstrip("/") for line in
               git("status", "--ignored", "--porcelain", "-z", "--untracked-files=normal")
               if line.startswith("!! ")]
    tracked = [path for path in git("ls-files", "-z") if path]
    problems = ["ignored by git but copied into the image: " + p for p in ignored
                if not excluded(p, rs)]
    problems += ["tracked but left out of the image: " + p for p in tracked
                 if excluded(p, rs) and p != ".dockerignore"]
    for p in problems:
        print(p)
    print("%d ignored path(s), %d tracked file(s) checked" % (len(ignored), len(tracked)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
