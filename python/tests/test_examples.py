"""examples/python: each runs with one command on a local cluster (1 ps, the
chief, two Python workers) and prints its test figure."""

import json
import os
import subprocess
from pathlib import Path

SOURCE = Path(os.environ.get("TROUPE_SOURCE_DIR", Path(__file__).resolve().parents[2]))
EXAMPLES = SOURCE / "examples" / "python"


def run_example(script, *args):
    out = subprocess.run(["/usr/bin/python3", str(EXAMPLES / script), *args],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_dlrm_learns_click_through_data(tmp_path):
    subprocess.run([str(SOURCE / "scripts" / "make-ctr-data"), str(tmp_path / "ctr"),
                    "--rows", "30000"], check=True, capture_output=True, timeout=120)
    result = run_example("dlrm.py", "--train", str(tmp_path / "ctr" / "train.tsv"),
                         "--test", str(tmp_path / "ctr" / "test.tsv"), "--steps", "800",
                         "--log-dir", str(tmp_path / "run"))
    assert result["step"] == 800
    assert result["test_auc"] > 0.58, result  # 0.61 here; the planted model's 0.79, chance 0.5
    assert "train_logloss" in result["reported"]


def test_biased_mf_beats_the_mean_on_movielens(tmp_path):
    subprocess.run([str(SOURCE / "scripts" / "convert-movielens"), str(tmp_path / "ml")],
                   check=True, capture_output=True, timeout=300)
    result = run_example("mf.py", "--train", str(tmp_path / "ml" / "train.csv"),
                         "--test", str(tmp_path / "ml" / "test.csv"), "--steps", "3000",
                         "--log-dir", str(tmp_path / "run"))
    assert result["step"] == 3000
    assert result["test_rmse"] < result["rmse_of_the_mean"] - 0.1, result


def test_an_example_without_its_data_says_how_to_make_it(tmp_path):
    out = subprocess.run(["/usr/bin/python3", str(EXAMPLES / "dlrm.py"), "--train",
                          str(tmp_path / "none.tsv")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0 and "scripts/make-ctr-data" in out.stderr
