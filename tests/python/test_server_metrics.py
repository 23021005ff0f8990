"""/metrics parsed by prometheus_client's own parser against the real `inferscale serve` binary:
every family labelled with the served model, the series a vLLM dashboard reads under the
project's names, and counters that move by what known requests did."""
import os

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from server_process import MODEL, MODEL_ID, Server

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="run scripts/setup.sh first")

FAMILIES = {
    "inferscale_prompt_tokens": "counter",
    "inferscale_time_per_output_token_seconds": "histogram",
    "inferscale_request_queue_time_seconds": "histogram",
    "inferscale_kv_cache_usage_ratio": "gauge",
    "inferscale_requests_finished_by_reason": "counter",
    "inferscale_http_errors": "counter",
    "inferscale_time_to_first_token_seconds": "histogram",
    "inferscale_request_latency_seconds": "histogram",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("metrics"), "--no-memory")
    yield s
    s.stop()


def scrape(server):
    """{family name: (type, {(sample name, labels without model_name): value})}, after checking
    that every sample carries the model's label."""
    families = {}
    for family in text_string_to_metric_families(httpx.get(server.url + "/metrics").text):
        samples = {}
        for s in family.samples:
            labels = dict(s.labels)
            assert labels.pop("model_name") == MODEL_ID, s
            samples[(s.name, tuple(sorted(labels.items())))] = s.value
        families[family.name] = (family.type, samples)
    return families


def value(families, family, sample=None, **labels):
    return families[family][1].get((sample or family, tuple(sorted(labels.items()))), 0.0)


def chat(server, max_tokens, content="Name three colors."):
    r = httpx.post(server.url + "/v1/chat/completions", timeout=60,
                   json={"model": MODEL_ID, "max_tokens": max_tokens, "temperature": 0,
                         "messages": [{"role": "user", "content": content}]})
    assert r.status_code == 200, r.text
    return r.json()


def test_families_have_their_types_and_the_model_label(server):
    chat(server, 4)
    families = scrape(server)
    for name, kind in FAMILIES.items():
        assert families[name][0] == kind, name
    assert 0.0 <= value(families, "inferscale_kv_cache_usage_ratio") <= 1.0


def test_counters_move_by_what_requests_did(server):
    before = scrape(server)
    first = chat(server, 6)
    second = chat(server, 3, "Say hi.")
    assert httpx.get(server.url + "/no/such/route").status_code == 404
    bad = httpx.post(server.url + "/v1/chat/completions", json={"model": MODEL_ID})
    assert bad.status_code == 400
    after = scrape(server)

    def grew(family, sample=None, **labels):
        return value(after, family, sample, **labels) - value(before, family, sample, **labels)

    prompt = first["usage"]["prompt_tokens"] + second["usage"]["prompt_tokens"]
    assert grew("inferscale_prompt_tokens", "inferscale_prompt_tokens_total") == prompt
    reasons = [r["choices"][0]["finish_reason"] for r in (first, second)]
    for reason in ("stop", "length"):
        assert grew("inferscale_requests_finished_by_reason",
                    "inferscale_requests_finished_by_reason_total",
                    finished_reason=reason) == reasons.count(reason)
    assert grew("inferscale_http_errors", "inferscale_http_errors_total", status="404") == 1
    assert grew("inferscale_http_errors", "inferscale_http_errors_total", status="400") == 1
    for histogram in ("inferscale_request_queue_time_seconds",
                      "inferscale_time_per_output_token_seconds"):
        assert grew(histogram, histogram + "_count") == 2
        assert grew(histogram, histogram + "_sum") > 0
    assert value(after, "inferscale_kv_cache_usage_ratio") == 0.0  # nothing running


DASHBOARD = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "grafana",
                         "inferscale-dashboard.json")


def test_grafana_dashboard_reads_only_exported_series_and_labels(tmp_path):
    """Every series a dashboard query names, and every label it groups by, is in /metrics of
    a server with memory on (the chunk pool's series appear only then)."""
    import json
    import re

    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert exprs
    s = Server(tmp_path)
    try:
        chat(s, 2)
        r = httpx.get(s.url + "/v1/chat/completions")
        labels_of = {}
        for family in text_string_to_metric_families(httpx.get(s.url + "/metrics").text):
            for sample in family.samples:
                labels_of.setdefault(sample.name, set()).update(sample.labels)
    finally:
        s.stop()
    assert r.status_code >= 400  # so the HTTP error series has a sample
    for expr in exprs:
        names = re.findall(r"\binferscale_\w+", expr)
        assert names, expr
        for name in names:
            assert name in labels_of, f"{name} (in {expr}) is not exported"
            assert "model_name" in labels_of[name], name
            for group in re.findall(r"by \(([^)]*)\)", expr):
                for label in (x.strip() for x in group.split(",")):
                    assert label == "le" or label in labels_of[name], (label, expr)
