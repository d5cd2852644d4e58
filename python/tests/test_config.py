"""troupe.load_config reads a task's configuration as troupe-node does."""

import os
from pathlib import Path

import pytest

import troupe

SOURCE = Path(os.environ.get("TROUPE_SOURCE_DIR", Path(__file__).resolve().parents[2]))
EXAMPLE = SOURCE / "config" / "examples" / "local-1ps-2workers.conf"


@pytest.fixture(autouse=True)
def _no_cluster_from_environment(monkeypatch, tmp_path):
    # The loader reads TF_CONFIG and caf-application.conf in the working
    # directory, as troupe-node does: neither may leak in from outside.
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)


def test_without_a_file_the_embedded_defaults_run_the_whole_cluster():
    cfg = troupe.load_config()
    assert cfg.whole_cluster and cfg.embedded_defaults
    assert cfg.name == "local"
    assert cfg.model == "softmax" and cfg.mode == "async"


def test_a_worker_of_an_example_cluster():
    cfg = troupe.load_config(EXAMPLE, job="worker", task=1)
    assert cfg.name == "worker:1"
    assert (cfg.job, cfg.task) == ("worker", 1)
    assert not cfg.whole_cluster
    assert len(cfg.cluster["ps"]) == 1 and len(cfg.cluster["worker"]) == 2
    assert cfg.config_file == str(EXAMPLE)
    assert "[train]" in cfg.effective


def test_the_command_line_overrides_the_file_and_says_so():
    cfg = troupe.load_config(EXAMPLE, job="worker", task=0, args=["--train.last-step=123"])
    assert cfg.last_step == 123
    assert cfg.sources["train.last-step"] == "the command line"


def test_tf_config_names_the_task(monkeypatch):
    monkeypatch.setenv(
        "TF_CONFIG",
        '{"cluster": {"chief": ["127.0.0.1:7000"], "ps": ["127.0.0.1:7001"],'
        ' "worker": ["127.0.0.1:7101"]}, "task": {"type": "worker", "index": 0}}',
    )
    cfg = troupe.load_config()
    assert cfg.name == "worker:0"
    assert cfg.cluster["chief"] == ["127.0.0.1:7000"]


def test_an_unknown_key_is_refused_by_name(tmp_path):
    conf = tmp_path / "typo.conf"
    conf.write_text(EXAMPLE.read_text().replace("[train]\n", "[train]\nbatch-sise = 10\n", 1))
    with pytest.raises(troupe.ConfigError, match="batch-sise"):
        troupe.load_config(conf, job="worker", task=0)


def test_a_value_out_of_range_names_the_key_and_the_fix():
    with pytest.raises(troupe.ConfigError, match="train.batch-size") as refused:
        troupe.load_config(EXAMPLE, job="worker", task=0, args=["--train.batch-size=0"])
    assert isinstance(refused.value, ValueError)


def test_a_task_beyond_its_job_is_refused():
    with pytest.raises(troupe.ConfigError, match="task"):
        troupe.load_config(EXAMPLE, job="worker", task=7)


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(troupe.ConfigError, match="missing.conf"):
        troupe.load_config(tmp_path / "missing.conf", job="worker", task=0)


@pytest.mark.parametrize("task", ["0", 1.0, True])
def test_a_task_index_must_be_an_int(task):
    with pytest.raises(TypeError):
        troupe.load_config(EXAMPLE, job="worker", task=task)
