"""Checks a serving directory against the run's checkpoints: for every
version whose step still has a checkpoint, the base before it and the deltas
up to it, composed by troupe-export --apply, equal troupe-export's export of
that checkpoint bit for bit (keys, values, dense variables), read by numpy.

    serving_chain_check.py TROUPE_EXPORT LOG_DIR OUT_DIR
Prints one line per version and a summary; exits 1 on any difference."""
import json
import os
import subprocess
import sys

from safetensors_np import read_safetensors, same_export


def versions(serving: str):
    """(bases, deltas): the versions of a serving directory, ascending."""
    bases, deltas = [], []
    for name in os.listdir(serving):
        if name.startswith("base-") and not name.endswith(".tmp"):
            bases.append(int(name[5:]))
        elif name.startswith("delta-") and name.endswith(".json"):
            deltas.append(int(name[6:-5]))
    return sorted(bases), sorted(deltas)


def step_of(serving: str, version: int, bases) -> int:
    if version in bases:
        path = os.path.join(serving, "base-%012d" % version, "version.json")
    else:
        path = os.path.join(serving, "delta-%012d.json" % version)
    with open(path) as f:
        return json.load(f)["step"]


def main() -> int:
    tool, log_dir, out = sys.argv[1:4]
    serving = os.path.join(log_dir, "serving")
    bases, deltas = versions(serving)
    checked = failed = deleted_rows = 0
    for v in sorted(set(bases) | set(deltas)):
        step = step_of(serving, v, bases)
        checkpoint = os.path.join(log_dir, "ckpt-%d" % step)
        if not os.path.isdir(checkpoint):
            continue
        base = max(b for b in bases if b <= v)
        chain = [os.path.join(serving, "delta-%012d.json" % d) for d in deltas if base < d <= v]
        composed, full = os.path.join(out, "v%d" % v), os.path.join(out, "full%d" % v)
        subprocess.run([tool, "--apply", os.path.join(serving, "base-%012d" % base)] + chain
                       + ["--out=" + composed], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([tool, checkpoint, full], check=True, stdout=subprocess.DEVNULL)
        differs = same_export(read_safetensors(os.path.join(composed, "model.safetensors")),
                              read_safetensors(os.path.join(full, "model.safetensors")))
        if v in deltas:
            deleted_rows += len(read_safetensors(
                os.path.join(serving, "delta-%012d.safetensors" % v))["embedding/deleted"])
        print("version %d (step %d, base %d + %d deltas): %s"
              % (v, step, base, len(chain), differs or "equal"))
        checked += 1
        failed += bool(differs)
    print("checked %d versions, %d differ, %d rows deleted by deltas"
          % (checked, failed, deleted_rows))
    return 1 if failed or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
