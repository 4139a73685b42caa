"""Admission in the SDK: answers (``Admission``, ``PatchOp``, ``json_pointer``), requests as the
harness builds them (the header as the host encodes it), and ``Harness.admit`` refusing writes
and HTTP, checking the manifest's ``[[admit]]`` tables and letting the plugin's errors through."""

import dataclasses
import json
import os
import struct

import pytest

from informant import (
    Admission,
    AdmissionRequest,
    Operation,
    PatchOp,
    Plugin,
    Resource,
    UserInfo,
    cache,
    http,
    json_pointer,
    kube,
)
from informant.admission import HTTP_REFUSED, NO_ADMIT, WRITES_REFUSED
from informant.testing import Harness, admission_request, added
from informant._testing_admission import plural


def raw(*fields):
    """The contract's header layout, spelled out: each field's length (u32, little-endian),
    then its UTF-8 bytes (crates/header)."""
    out = b""
    for f in fields:
        b = f.encode("utf-8")
        out += struct.pack("<I", len(b)) + b
    return out


def pod(name="web", ns="shop", labels=None, **meta):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "labels": labels or {}, **meta},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }


# Answers


def test_answers_are_values_each_setter_a_new_one():
    allow = Admission.allow()
    assert (allow.allowed, allow.code, allow.message, allow.warnings, allow.patch_json) == (
        True, 0, "", (), None,
    )
    deny = Admission.deny("no")
    coded = deny.with_code(422).warn("first").warn("second")
    assert (deny.code, deny.warnings) == (0, ())
    assert (coded.allowed, coded.code, coded.message, coded.warnings) == (
        False, 422, "no", ("first", "second"),
    )
    assert Admission.allow().warn("w") == Admission.allow().warn("w")
    for bad in (-1, 1 << 16, 1.5, True):
        with pytest.raises(ValueError, match="fit in a u16"):
            deny.with_code(bad)


def test_a_patch_is_compact_json_patch_text():
    a = Admission.patch([
        PatchOp.add(json_pointer(["metadata", "labels", "team"]), "payments"),
        PatchOp.replace("/spec/replicas", 2),
        PatchOp.remove("/metadata/annotations"),
        {"op": "test", "path": "/x", "value": "ü"},
    ])
    assert a.allowed
    assert a.patch_json == (
        '[{"op":"add","path":"/metadata/labels/team","value":"payments"},'
        '{"op":"replace","path":"/spec/replicas","value":2},'
        '{"op":"remove","path":"/metadata/annotations"},'
        '{"op":"test","path":"/x","value":"ü"}]'
    )
    assert a.patch_ops()[1] == {"op": "replace", "path": "/spec/replicas", "value": 2}
    assert Admission.patch([]).patch_json is None
    assert Admission.patch_text('[{"op":"remove","path":"/a"}]').patch_json == '[{"op":"remove","path":"/a"}]'
    with pytest.raises(TypeError, match="list of JSON Patch operations"):
        Admission.patch(PatchOp.remove("/a"))
    with pytest.raises(ValueError, match="add, replace or remove"):
        PatchOp("move", "/a")
    assert PatchOp.remove("/a") == PatchOp.remove("/a")


def test_json_pointers_escape_tilde_and_slash():
    assert json_pointer(["metadata", "labels", "a/b"]) == "/metadata/labels/a~1b"
    assert json_pointer(["x~y", "~/"]) == "/x~0y/~0~1"
    assert json_pointer([]) == ""
    with pytest.raises(TypeError):
        json_pointer("metadata")


# Requests


def test_a_request_carries_what_the_host_sends():
    req = (
        admission_request("create", pod(labels={"b": "2", "a": "1"}, uid="u1", resourceVersion="7"))
        .uid("r-1")
        .hook("images")
        .user_info(UserInfo("alice", "u-a", ("devs",), (("scopes", ("x", "y")),)))
        .options({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"})
        .dry_run()
        .build()
    )
    assert (req.uid, req.hook, req.operation, req.kind) == ("r-1", "images", Operation.CREATE, Resource("", "v1", "Pod"))
    assert req.operation == "create" and str(req.operation) == "create"
    assert (req.resource.group, req.resource.version, req.resource.resource) == ("", "v1", "pods")
    assert (req.sub_resource, req.namespace, req.name, req.dry_run) == ("", "shop", "web", True)
    assert req.user_info == UserInfo("alice", "u-a", ("devs",), (("scopes", ("x", "y")),))
    assert json.loads(req.options_json) == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    # The metadata is the host's parse of the header: labels sorted, as the host encodes them.
    assert req.wire.header == raw("", "v1", "Pod", "shop", "web", "u1", "7", "a", "1", "b", "2")
    assert (req.meta.key, req.meta.uid, req.meta.resource_version) == ("shop/web", "u1", "7")
    assert req.meta.label("a") == "1"
    assert req.object()["spec"]["containers"][0]["image"] == "nginx"
    assert req.object() is req.object(), "parsed once"
    assert req.old_object() is None and req.old_object_json is None
    assert "AdmissionRequest(create, v1/Pod, 'shop/web', hook='images')" == repr(req)


def test_defaults_user_resource_and_managed_fields():
    req = admission_request("update", pod(managedFields=[{"manager": "kubectl"}])).old_object(pod(labels={"v": "1"})).build()
    assert req.user_info == UserInfo("tester", "", ("system:authenticated",), ())
    assert (req.uid, req.hook, req.dry_run, req.options_json) == ("test-request", "", False, None)
    assert "managedFields" not in req.object()["metadata"]
    assert req.old_object()["metadata"]["labels"] == {"v": "1"}
    # The header is the new object's.
    assert req.meta.labels == {}
    assert admission_request("create", pod()).user("bob", ["ops"]).build().user_info.groups == ("ops",)
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"}}
    r = admission_request("create", ingress).build().resource
    assert (r.group, r.version, r.resource) == ("networking.k8s.io", "v1", "ingresses")
    assert [plural(k) for k in ("NetworkPolicy", "Gateway", "Pod", "Batch", "Mesh", "Box")] == [
        "networkpolicies", "gateways", "pods", "batches", "meshes", "boxes",
    ]
    eps = admission_request("create", pod()).resource("", "v1", "endpoints").sub_resource("status").build()
    assert (eps.resource.resource, eps.sub_resource) == ("endpoints", "status")


def test_a_delete_has_the_stored_object_as_its_old_one_and_its_header():
    req = admission_request("delete", pod(labels={"team": "x"})).build()
    assert req.object() is None and req.object_json is None
    assert req.old_object()["metadata"]["name"] == "web"
    assert req.meta.label("team") == "x"


def test_the_header_fills_name_and_namespace_from_the_request_as_the_host_does():
    # A create with generateName: no name in the object, none in the request either.
    gen = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"}}
    req = admission_request("create", gen).namespace("shop").build()
    assert req.wire.header == raw("", "v1", "Pod", "shop", "", "", "")
    assert (req.name, req.namespace, req.meta.key) == ("", "shop", "shop/")
    named = admission_request("create", gen).namespace("shop").name("given").build()
    assert named.meta.name == "given"
    # The object's own namespace wins over the request's; a cluster-scoped request has none.
    assert admission_request("create", pod()).namespace("other").build().meta.namespace == "shop"
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
    cluster = admission_request("create", ns).build()
    assert (cluster.namespace, cluster.meta.namespace, cluster.meta.key) == (None, None, "shop")
    assert admission_request("create", pod()).namespace(None).build().namespace is None


def test_a_request_without_a_header_says_so_and_bad_json_names_the_request():
    req = admission_request("create", pod()).build()
    req.wire.header = b""
    with pytest.raises(ValueError, match=r"admission request test-request: no object, so no metadata \(create of v1/Pod\)"):
        req.meta
    bad = AdmissionRequest(dataclasses.replace(req.wire, object="{nope"))
    with pytest.raises(ValueError, match="admission request test-request: the object is not JSON"):
        bad.object()


def test_the_builder_refuses_what_the_host_never_sends():
    with pytest.raises(ValueError, match="operation must be one of create, update, delete, connect, got 'patch'"):
        admission_request("patch", pod())
    with pytest.raises(ValueError, match="no `apiVersion`"):
        admission_request("create", {"kind": "Pod"})
    with pytest.raises(ValueError, match="no `kind`"):
        admission_request("create", {"apiVersion": "v1"})
    with pytest.raises(ValueError, match="not valid JSON"):
        admission_request("create", "{")
    with pytest.raises(ValueError, match="must be a JSON object"):
        admission_request("create", "[1]")
    assert admission_request("create", json.dumps(pod())).build().meta.name == "web"
    assert admission_request(Operation.CONNECT, pod()).build().operation is Operation.CONNECT


# The harness


class Policy(Plugin):
    """Denies Pods in namespaces labelled `locked`; tries a write or HTTP when asked to."""

    def admit(self, req):
        ns = cache.get(Resource("", "v1", "Namespace"), req.namespace or "")
        if ((ns or {}).get("metadata", {}).get("labels") or {}).get("locked"):
            return Admission.deny(f"namespace {req.namespace} is locked").with_code(409)
        if req.meta.label("try") == "write":
            kube.apply(req.kind, req.name, {"metadata": {"labels": {"x": "y"}}}, namespace=req.namespace)
        if req.meta.label("try") == "http":
            http.get("https://example.com/")
        if req.meta.label("try") == "cache":
            # The request's object is not in the cache: admission comes before the write.
            return Admission.allow().warn(str(cache.get(req.kind, req.name, req.namespace)))
        return Admission.allow().warn(f"{req.hook or '-'}: {req.operation} {req.meta.key}")

    def on_added(self, ev):
        kube.apply(ev.resource, ev.meta.name, {"metadata": {"labels": {"seen": "y"}}}, namespace=ev.meta.namespace)


def test_admit_reads_the_cache_and_answers():
    h = Harness(Policy)
    assert h.admit(admission_request("create", pod())).warnings == ("-: create shop/web",)
    h.cache.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"locked": "y"}}})
    a = h.admit(admission_request("create", pod()))
    assert (a.allowed, a.code, a.message) == (False, 409, "namespace shop is locked")
    # A built request is taken too.
    assert not h.admit(admission_request("update", pod()).build()).allowed
    # The request's object is not put in the cache.
    assert Harness(Policy).admit(admission_request("create", pod(labels={"try": "cache"}))).warnings == ("None",)


def test_writes_and_http_are_refused_during_admit_only():
    h = Harness(Policy)
    with pytest.raises(kube.Denied) as write:
        h.admit(admission_request("create", pod(labels={"try": "write"})))
    assert write.value.message == WRITES_REFUSED
    h.http.respond("https://example.com/", 200, "hi")
    with pytest.raises(http.Denied) as sent:
        h.admit(admission_request("create", pod(labels={"try": "http"})))
    assert str(sent.value) == f"GET https://example.com/: {HTTP_REFUSED}"
    assert (h.writes, h.http.requests) == ([], [])
    # After admit, an event's write goes through again.
    h.send(added(pod()))
    assert [w["verb"] for w in h.writes] == ["apply"]


def test_a_plugin_without_admit_refuses_and_errors_propagate():
    class Events(Plugin):
        pass

    with pytest.raises(NotImplementedError, match="does not answer admission requests"):
        Harness(Events).admit(admission_request("create", pod()))
    assert NO_ADMIT.startswith("this plugin does not answer admission requests")

    class Wrong(Plugin):
        def admit(self, req):
            if req.name == "none":
                return None
            if req.name == "async":
                return self._later()
            raise KeyError("boom")

        async def _later(self):
            return Admission.allow()

    h = Harness(Wrong)
    with pytest.raises(TypeError, match="admit returned NoneType, not an Admission"):
        h.admit(admission_request("create", pod("none")))
    with pytest.raises(TypeError, match=r"a coroutine \(admit is synchronous\)"):
        h.admit(admission_request("create", pod("async")))
    with pytest.raises(KeyError, match="boom"):
        h.admit(admission_request("create", pod("x")))


MANIFEST = """
[[watch]]
api-version = "v1"
kind = "Namespace"

[[admit]]
name = "check"
api-version = "v1"
kind = "Pod"
mode = "validate"

[[admit]]
name = "label"
api-version = "v1"
kind = "Pod"
operations = ["create", "delete"]
mode = "mutate"
"""


def test_a_harness_from_a_manifest_names_the_table_and_refuses_what_none_takes(tmp_path):
    path = os.path.join(tmp_path, "policy.toml")
    with open(path, "w") as f:
        f.write(MANIFEST)
    h = Harness.from_manifest(Policy, path)
    assert [t["name"] for t in h.admits] == ["check", "label"]
    # The first table that takes it, unless the request names one.
    assert h.admit(admission_request("create", pod())).warnings == ("check: create shop/web",)
    assert h.admit(admission_request("create", pod()).hook("label")).warnings == ("label: create shop/web",)
    assert h.admit(admission_request("delete", pod())).warnings == ("label: delete shop/web",)
    with pytest.raises(ValueError, match=r"no \[\[admit\]\] table of the manifest admits UPDATE of v1/Pod"):
        h.admit(admission_request("update", pod()).hook("label"))
    with pytest.raises(ValueError, match=r"admits CONNECT of v1/Pod"):
        h.admit(admission_request("connect", pod()))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "a", "name": "b"}}
    with pytest.raises(ValueError, match=r"admits CREATE of v1/ConfigMap"):
        h.admit(admission_request("create", cm))
    # The manifest's watch applies to admit's cache reads too.
    assert h.cache.watched == {Resource("", "v1", "Namespace")}
