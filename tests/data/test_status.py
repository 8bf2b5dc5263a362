"""`enabled: auto` of the datasets (featlearn.pipeline.workflow.dataset_status): a dataset to download is switched
on only where a host of each absent file's sources answers, in a real run."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from featlearn.data.registry import DATASETS
from featlearn.pipeline import workflow as wf
from featlearn.pipeline.estimate import assume_online

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def online_config(monkeypatch):
    """The default config, every dataset `auto`, online, no mirror."""
    for var in ("FEATLEARN_OFFLINE", "FEATLEARN_DATA_MIRROR", "FEATLEARN_DATA_HOST_ADDRESS", *wf.PROXY_VARIABLES):
        monkeypatch.delenv(var, raising=False)
    config = wf.merged_config([], str(ROOT / "config"))
    config["data"]["offline"], config["data"]["mirror"] = False, None
    for name in DATASETS:
        config["data"]["datasets"][name]["enabled"] = "auto"
    return config


def _hosts(name: str) -> set[str]:
    return {wf._endpoint(s.url) for f in DATASETS[name].files for s in f.sources}


def test_without_a_check_an_absent_dataset_online_will_download(online_config, tmp_path):
    status = wf.dataset_status(online_config, tmp_path / "raw")
    assert all(s.enabled and s.reason == "will download" for s in status.values())


def test_a_dataset_whose_hosts_do_not_answer_is_left_out_and_says_why(online_config, tmp_path):
    """PTB's host answers, nothing else does: PTB is on, the rest are off with the hosts named; the check is asked
    once for all hosts; the estimate's --assume-online switches them on again."""
    asked = []

    def reachable(hosts):
        asked.append(list(hosts))
        return {h: h in _hosts("ptb") for h in hosts}

    status = wf.dataset_status(online_config, tmp_path / "raw", reachable=reachable)
    assert len(asked) == 1 and set(asked[0]) >= _hosts("ptb") | _hosts("sst")
    assert status["ptb"].enabled and status["ptb"].reason == "will download"
    sst = status["sst"]
    assert not sst.enabled and sst.reason.startswith(wf.UNREACHABLE)
    assert all(h in sst.reason for h in _hosts("sst")) and "data.datasets.sst.enabled: true" in sst.reason
    assert all(s.enabled for s in assume_online(status).values())


def test_one_answering_source_of_a_file_is_enough(online_config, tmp_path):
    multi = next((d for d in DATASETS.values() if any(len(f.sources) > 1 for f in d.files)), None)
    if multi is None:
        pytest.skip("no dataset has a file with two sources")
    backup = {wf._endpoint(f.sources[-1].url) for f in multi.files}
    status = wf.dataset_status(online_config, tmp_path / "raw", reachable=lambda hosts: {h: h in backup for h in hosts})
    assert status[multi.name].enabled


def test_present_files_offline_and_fixed_switches_are_not_checked(online_config, tmp_path):
    raw = tmp_path / "raw"
    for f in DATASETS["ptb"].files:
        (raw / "ptb").mkdir(parents=True, exist_ok=True)
        (raw / "ptb" / f.name).write_text("x")
    online_config["data"]["datasets"]["sst"]["enabled"] = False
    online_config["data"]["datasets"]["imdb"]["enabled"] = True
    asked = []
    status = wf.dataset_status(online_config, raw, reachable=lambda hosts: asked.extend(hosts) or {h: False for h in hosts})
    assert status["ptb"].reason == "files present" and status["imdb"].enabled and not status["sst"].enabled
    checked = set().union(*(_hosts(n) for n in DATASETS if n not in ("ptb", "sst", "imdb")))
    assert sorted(asked) == sorted(checked)  # only the hosts of the datasets still to download, each once
    online_config["data"]["offline"] = True
    asked.clear()
    offline = wf.dataset_status(online_config, raw, reachable=lambda hosts: asked.extend(hosts) or {})
    assert asked == [] and offline["wikitext2"].reason.startswith("offline and ")


def test_hosts_reachable_opens_a_connection_and_skips_behind_a_proxy(monkeypatch):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    try:
        monkeypatch.setenv("FEATLEARN_DATA_HOST_ADDRESS", f"127.0.0.1:{listener.getsockname()[1]}")
        assert wf.hosts_reachable(["a.example:443", "b.example:80"]) == {"a.example:443": True, "b.example:80": True}
    finally:
        listener.close()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    monkeypatch.setenv("FEATLEARN_DATA_HOST_ADDRESS", f"127.0.0.1:{port}")
    assert wf.hosts_reachable(["a.example:443"], timeout=1.0) == {"a.example:443": False}
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert wf.hosts_reachable(["a.example:443"]) == {"a.example:443": True}


def test_a_server_is_its_url_host_and_port():
    assert wf._endpoint("http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz") == "www.fit.vutbr.cz:80"
    assert wf._endpoint("https://nlp.stanford.edu/sentiment/x.zip") == "nlp.stanford.edu:443"
    assert wf._endpoint("https://localhost:8443/x") == "localhost:8443"
