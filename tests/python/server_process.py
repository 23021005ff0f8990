"""Starts the real `inferscale serve` binary for a test and stops it afterwards."""
import json
import os
import re
import signal
import socket
import subprocess
import time

import httpx

BIN = os.path.join(os.environ.get("INFERSCALE_BIN", "build/bin"), "inferscale")
MODEL = os.path.join(os.environ.get("INFERSCALE_MODELS", "models"), "SmolLM2-135M-Instruct.Q4_1.gguf")
MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"
MODEL_LABEL = re.compile(r'model_name="[^"]*"')
# What GET /v1/models lists: the served model, then the embedding model `serve` picks up by
# default (models/all-minilm-l6-v2 beside the build tree, else under ./models) where it exists.
EMBED_ID = "all-MiniLM-L6-v2"
SERVED_IDS = [MODEL_ID] + ([EMBED_ID] if any(
    os.path.exists(os.path.join(d, "all-minilm-l6-v2", "model.safetensors"))
    for d in (os.path.join(os.path.dirname(os.path.abspath(BIN)), "..", "..", "models"),
              "models")) else [])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp_path, *extra, keys=None, port=None, model=MODEL):
        """`port`: the port to serve on (default: a free one, chosen at each start); `model`:
        the model file (default: the bundled one)."""
        self.tmp_path = tmp_path
        self.fixed_port = port
        self.model = model
        self.db = str(tmp_path / "memory.db")
        self.extra = list(extra)
        self.keys_file = None
        if keys is not None:
            self.keys_file = str(tmp_path / "keys.json")
            with open(self.keys_file, "w") as f:
                json.dump({"keys": [{"key": k, "users": u} for k, u in keys.items()]}, f)
        self.proc = None
        self.start()

    def start(self):
        self.port = self.fixed_port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [BIN, "serve", "--model", self.model, "--port", str(self.port), "--db", self.db,
                "--chunk-dir", str(self.tmp_path / "chunks")] + self.extra
        if self.keys_file:
            args += ["--api-keys", self.keys_file]
        self.log = open(self.tmp_path / f"server-{self.port}.log", "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}: {self.read_log()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the server did not come up: " + self.read_log())

    def read_log(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def metrics(self):
        """Every series by name and labels, without the `model_name` label all of them carry."""
        out = {}
        for line in httpx.get(self.url + "/metrics").text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                name = MODEL_LABEL.sub("", name).replace("{,", "{").replace("{}", "")
                out[name] = float(value)
        return out

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def api_client(server, key, timeout=600):
    """An httpx client of `server` that sends `key` as its bearer token."""
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"},
                        timeout=timeout)


def ok(res, status=200):
    """The JSON body of a response that must have `status`."""
    assert res.status_code == status, (res.status_code, res.text)
    return res.json()
