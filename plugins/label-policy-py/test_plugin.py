"""label-policy-py's unit tests: plain pytest against the SDK's in-memory harness."""

import json
import os

import pytest

from informant import Resource
from informant.log import Level
from informant.testing import Harness, added, deleted, resync, updated
from plugin import LabelPolicy

MANIFEST = os.path.join(os.path.dirname(__file__), "label-policy-py.toml")


def cm(name, labels=None, ns="default"):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": ns, "name": name, "labels": labels or {}},
    }


def deploy(name, labels=None, ns="default"):
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"namespace": ns, "name": name, "labels": labels or {}},
    }


def lines(h, level):
    return [json.loads(m) for lv, m in h.take_logs() if lv == level]


def test_warns_about_missing_labels_from_metadata_only():
    h = Harness(LabelPolicy, {"required": ["team", "app"], "summary-every": 0})
    h.send(added(cm("ok", {"team": "a", "app": "x"})))
    h.send(added(cm("bad", {"team": "a"})))
    assert lines(h, Level.WARN) == [
        {"violation": {"kind": "ConfigMap", "namespace": "default", "name": "bad"}, "missing": ["app"]}
    ]


def test_updates_and_resyncs_are_checked_deletes_are_not():
    h = Harness(LabelPolicy, {"required": ["team"], "summary-every": 0})
    h.send(updated(cm("a", {"team": "x"}), cm("a")))
    h.send(deleted(cm("b")))
    names = [w["violation"]["name"] for w in lines(h, Level.WARN)]
    assert names == ["a"]


def test_summary_counts_cached_objects_without_each_label():
    h = Harness.from_manifest(LabelPolicy, MANIFEST)
    h.cache.put(cm("a"), cm("b", {"team": "t"}), deploy("d1"), deploy("d2"))
    h.plugin.summary_every = 1
    h.send(added(deploy("d3", {"team": "t"})))
    summaries = [line["summary"] for line in lines(h, Level.INFO)]
    assert summaries == [{"apps/v1/Deployment": {"missing:team": 2}, "v1/ConfigMap": {"missing:team": 1}}]


def test_without_resources_a_summary_covers_the_kinds_seen():
    h = Harness(LabelPolicy, {"required": ["team"], "summary-every": 2})
    h.send(added(cm("a")))
    h.send(added(cm("b", {"team": "t"})))
    assert [line["summary"] for line in lines(h, Level.INFO)] == [{"v1/ConfigMap": {"missing:team": 1}}]


def test_one_summary_per_resync_round():
    h = Harness(LabelPolicy, {"required": ["team"], "summary-every": 0})
    for name in ("a", "b", "c"):
        h.send(resync(cm(name, {"team": "t"})))
    h.send(added(cm("d", {"team": "t"})))
    h.send(resync(cm("a", {"team": "t"})))
    assert len(lines(h, Level.INFO)) == 2


def test_a_summary_on_an_unwatched_kind_fails_the_event_with_the_reason():
    h = Harness.from_manifest(LabelPolicy, MANIFEST)
    h.plugin.summary_every = 1
    h.plugin.kinds.add(Resource("batch", "v1", "Job"))
    with pytest.raises(RuntimeError, match="summary of batch/v1/Job: batch/v1/Job is not watched"):
        h.send(added(cm("a", {"team": "t"})))


@pytest.mark.parametrize(
    "config, message",
    [
        ({"required": []}, "names no label"),
        ({"required": ["bad key"]}, "invalid label key `bad key`"),
        ({"required": ["team"], "summary-every": -1}, "non-negative"),
        ({"required": ["team"], "colour": "red"}, "unknown field `colour`"),
        ({}, "must be a list"),
    ],
)
def test_bad_config_is_refused_with_the_reason(config, message):
    with pytest.raises(ValueError, match=message):
        Harness(LabelPolicy, config)


def test_the_manifest_config_is_valid():
    h = Harness.from_manifest(LabelPolicy, MANIFEST)
    assert h.plugin.required == ["team"]
    assert h.plugin.summary_every == 100
