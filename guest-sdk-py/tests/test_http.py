"""The http module natively: URL splitting, typed errors, and the harness's recorded requests
and canned answers (the component path is exercised end to end in tests/e2e/polyglot_http.rs)."""

import pytest

from informant import Plugin, Retry, http, log
from informant.http import Request, Response
from informant.testing import Harness, added


def cm(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default", "name": name}}


class Notifier(Plugin):
    """Posts each add to its configured webhook; a non-2xx answer or a failure is a retry."""

    def __init__(self, config):
        self.url = config["url"]

    def on_added(self, ev):
        try:
            r = http.post_json(self.url, {"key": ev.meta.key}, timeout=2)
        except http.HttpError as e:
            raise Retry(f"{type(e).__name__}: {e}")
        if not r.ok:
            raise Retry(f"webhook answered {r.status}")
        log.info(f"{r.status} {r.json()['seen']}")


URL = "http://127.0.0.1:8080/hook?x=1"


def test_urls_split_as_wasi_http_wants_them():
    r = Request("POST", "HTTPS://Hooks.example.com:8443/a/b?c=d", [], b"", 1.0)
    assert (r.scheme, r.authority, r.path_with_query) == ("https", "Hooks.example.com:8443", "/a/b?c=d")
    assert http.split_url("http://h?q") == ("http", "h", "?q")
    assert http.split_url("http://h:1") == ("http", "h:1", "/")
    for bad, why in [("h/x", "not an absolute"), ("ftp://h/", "only http and https"), ("http:///x", "names no host")]:
        with pytest.raises(http.InvalidRequest, match=why):
            http.split_url(bad)
    assert issubclass(http.InvalidRequest, ValueError) and issubclass(http.InvalidRequest, http.HttpError)


def test_without_a_canned_answer_a_request_fails_saying_there_is_no_host():
    h = Harness(Notifier, {"url": URL})
    retry = h.send(added(cm("a")))
    assert retry is not None and retry.reason.startswith(f"HttpError: POST {URL}: not sent: outbound HTTP needs the host")
    # Still recorded: the plugin did send it.
    assert [(r.method, r.url, r.json()) for r in h.http.requests] == [("POST", URL, {"key": "default/a"})]
    assert ("content-type", "application/json") in h.http.requests[0].headers
    assert h.http.requests[0].timeout == 2.0


def test_canned_answers_come_back_with_status_headers_and_body():
    h = Harness(Notifier, {"url": URL})
    h.http.respond(URL, 201, {"seen": 1})
    assert h.send(added(cm("a"))) is None
    assert h.take_logs()[0][1] == "201 1"
    h.http.respond(URL, 503, "down")
    assert h.send(added(cm("b"))).reason == "webhook answered 503"
    # A redirect is an answer like any other: nothing follows it.
    h.http.respond(URL, 302, b"", [("Location", "http://elsewhere/")])
    assert h.send(added(cm("c"))).reason == "webhook answered 302"
    assert len(h.http.requests) == 3


def test_failures_raise_typed_errors_with_the_wasi_code():
    h = Harness(Notifier, {"url": URL})
    h.http.fail(URL, "connection-read-timeout")
    assert h.send(added(cm("a"))).reason == f"Timeout: POST {URL}: connection-read-timeout"
    h.http.fail(URL)
    assert h.send(added(cm("b"))).reason == f"HttpError: POST {URL}: connection-refused"
    e = http.error_for(Request("GET", URL, [], b"", 1.0), "dns-error", "rcode=x")
    assert (type(e), e.code, str(e)) == (http.HttpError, "dns-error", f"GET {URL}: dns-error: rcode=x")


MANIFEST = """
allowed-outbound-hosts = ["http://127.0.0.1:8080", "https://hooks.example.com", "http://[::1]:*"]
[[watch]]
api-version = "v1"
kind = "ConfigMap"
[config]
url = "http://127.0.0.1:9090/hook"
"""


def test_a_harness_from_a_manifest_denies_origins_it_does_not_list(tmp_path):
    manifest = tmp_path / "notifier.toml"
    manifest.write_text(MANIFEST)
    h = Harness.from_manifest(Notifier, str(manifest))
    retry = h.send(added(cm("a")))
    assert retry.reason == (
        "Denied: POST http://127.0.0.1:9090/hook: denied by the host: the origin is not in the "
        "plugin's `allowed-outbound-hosts` (or its tenant's)"
    )
    assert h.http.requests == [], "a denied request is never sent"
    # The scheme's default port, any port for `*`, hosts compared lowercase; user info never.
    for url, allowed in [
        ("https://HOOKS.example.com/x", True),
        ("https://hooks.example.com:443/x", True),
        ("http://hooks.example.com/x", False),
        ("http://[::1]:1234/", True),
        ("http://127.0.0.1:8080", True),
        ("http://u@127.0.0.1:8080/", False),
    ]:
        h.http.respond(url, 204)

        def call():
            return h.run(lambda: http.get(url))

        if allowed:
            assert call().status == 204, url
        else:
            with pytest.raises(http.Denied):
                call()


def test_send_takes_mappings_text_and_a_positive_timeout():
    h = Harness(Notifier, {"url": URL})
    h.http.respond(URL, 200, "fine", [("X-Reply", "yes")])
    r = h.run(lambda: http.send("put", URL, {"x-a": "1"}, "héllo", timeout=0.5))
    assert (r.status, r.text(), r.header("x-reply"), r.header("missing"), r.ok) == (200, "fine", "yes", None, True)
    sent = h.http.requests[-1]
    assert (sent.method, sent.headers, sent.body, sent.text()) == ("PUT", [("x-a", "1")], "héllo".encode(), "héllo")
    with pytest.raises(http.InvalidRequest, match="timeout must be positive"):
        h.run(lambda: http.get(URL, timeout=0))
    assert Response(404, [], b"").ok is False


def test_outside_a_harness_or_component_http_needs_the_host():
    with pytest.raises(RuntimeError, match="needs the host"):
        http.get(URL)
