"""/os-keypairs over HTTP at each microversion that changes it, on every backend."""

from __future__ import annotations

import base64
import datetime
import hashlib

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from tests.compute.conftest import ComputeServer

USER_A = "user-a:project-a"
USER_B = "user-b:project-a"


def _ssh_public_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode() + " me@host"


def _md5_fingerprint(public_key: str) -> str:
    digest = hashlib.md5(base64.b64decode(public_key.split(" ")[1])).hexdigest()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def _certificate() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "someone")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    digest = cert.fingerprint(hashes.SHA1()).hex()
    return cert.public_bytes(serialization.Encoding.PEM).decode(), ":".join(
        digest[i:i + 2] for i in range(0, len(digest), 2))


def test_generate_and_import_by_version(compute: ComputeServer) -> None:
    old = compute.client("2.1", token=USER_A)
    generated = old.post("/v2.1/os-keypairs", json={"keypair": {"name": "gen"}})
    assert generated.status_code == 200
    body = generated.json()["keypair"]
    assert set(body) == {"name", "public_key", "fingerprint", "user_id", "private_key"}
    assert body["user_id"] == "user-a" and body["name"] == "gen"
    assert body["public_key"].startswith("ssh-rsa ") and body["public_key"].endswith(" Generated-by-Nova")
    assert body["fingerprint"] == _md5_fingerprint(body["public_key"])
    private = serialization.load_pem_private_key(body["private_key"].encode(), password=None)
    assert body["private_key"].startswith("-----BEGIN RSA PRIVATE KEY-----\n")
    assert isinstance(private, rsa.RSAPrivateKey) and private.key_size == 2048
    public_from_private = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    assert body["public_key"] == public_from_private + " Generated-by-Nova"

    new = compute.client("2.2", token=USER_A)
    public_key = _ssh_public_key()
    imported = new.post("/v2.1/os-keypairs", json={"keypair": {"name": "imp", "public_key": public_key}})
    assert imported.status_code == 201
    assert imported.json() == {"keypair": {
        "name": "imp", "public_key": public_key, "fingerprint": _md5_fingerprint(public_key), "user_id": "user-a",
        "type": "ssh"}}
    # The private key is given once: never in show or list.
    shown = new.get("/v2.1/os-keypairs/gen").json()["keypair"]
    assert "private_key" not in shown and shown["public_key"] == body["public_key"]


def test_x509_keypairs(compute: ComputeServer) -> None:
    client = compute.client("2.2", token=USER_A)
    pem, fingerprint = _certificate()
    imported = client.post("/v2.1/os-keypairs", json={"keypair": {"name": "cert", "type": "x509", "public_key": pem}})
    assert imported.status_code == 201
    assert imported.json()["keypair"]["fingerprint"] == fingerprint
    assert imported.json()["keypair"]["type"] == "x509"

    generated = client.post("/v2.1/os-keypairs", json={"keypair": {"name": "wincert", "type": "x509"}})
    assert generated.status_code == 201
    body = generated.json()["keypair"]
    certificate = x509.load_pem_x509_certificate(body["public_key"].encode())
    assert certificate.subject.rfc4514_string() == "CN=user-a"
    key, bundled, _others = pkcs12.load_key_and_certificates(base64.b64decode(body["private_key"]), b"")
    assert bundled == certificate and key is not None
    digest = certificate.fingerprint(hashes.SHA1()).hex()
    assert body["fingerprint"] == ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))

    bad = client.post("/v2.1/os-keypairs", json={"keypair": {"name": "bad", "type": "x509", "public_key": "nope"}})
    assert bad.status_code == 400
    assert bad.json()["badRequest"]["message"].startswith(
        "Keypair data is invalid: failed to generate X509 fingerprint. Error message: ")


@pytest.mark.parametrize(("name", "message"), [
    (" lead", "An invalid 'name' value was provided. The name must be: printable characters. "
              "Can not start or end with whitespace."),
    ("trail ", "An invalid 'name' value was provided. The name must be: printable characters. "
               "Can not start or end with whitespace."),
    ("a.b", "Invalid input for field/attribute name. Value: a.b. 'a.b' does not match '^[_\\\\- a-zA-Z0-9]+$'"),
    ("é", "Invalid input for field/attribute name. Value: é. 'é' does not match '^[_\\\\- a-zA-Z0-9]+$'"),
    ("x" * 256, f"Invalid input for field/attribute name. Value: {'x' * 256}. '{'x' * 256}' is too long"),
])
def test_names_upstream_refuses(compute: ComputeServer, name: str, message: str) -> None:
    resp = compute.client("2.73", token=USER_A).post("/v2.1/os-keypairs", json={"keypair": {"name": name}})
    assert resp.status_code == 400
    assert resp.json() == {"badRequest": {"code": 400, "message": message}}
    assert compute.client("2.73", token=USER_A).get("/v2.1/os-keypairs").json() == {"keypairs": []}


def test_names_compare_exactly_and_conflicts(compute: ComputeServer) -> None:
    a = compute.client("2.73", token=USER_A)
    for name in ("with space", "Key_1", "key_1", "x" * 255):
        assert a.post("/v2.1/os-keypairs", json={"keypair": {"name": name, "public_key": _ssh_public_key()}}
                      ).status_code == 201, name
    again = a.post("/v2.1/os-keypairs", json={"keypair": {"name": "Key_1", "public_key": _ssh_public_key()}})
    assert again.status_code == 409
    assert again.json() == {"conflictingRequest": {"code": 409, "message": "Key pair 'Key_1' already exists."}}
    # Another user may have the same name.
    b = compute.client("2.73", token=USER_B)
    assert b.post("/v2.1/os-keypairs", json={"keypair": {"name": "Key_1", "public_key": _ssh_public_key()}}
                  ).status_code == 201
    assert [k["keypair"]["name"] for k in a.get("/v2.1/os-keypairs").json()["keypairs"]] == [
        "Key_1", "key_1", "with space", "x" * 255]
    assert [k["keypair"]["name"] for k in b.get("/v2.1/os-keypairs").json()["keypairs"]] == ["Key_1"]
    assert a.get("/v2.1/os-keypairs/with%20space").json()["keypair"]["name"] == "with space"


def test_bad_bodies(compute: ComputeServer) -> None:
    v21 = compute.client("2.1", token=USER_A)
    typed = v21.post("/v2.1/os-keypairs", json={"keypair": {"name": "k", "type": "ssh"}})
    assert typed.status_code == 400
    assert "Additional properties are not allowed ('type' was unexpected)" in typed.json()["badRequest"]["message"]
    v22 = compute.client("2.2", token=USER_A)
    other_user = v22.post("/v2.1/os-keypairs", json={"keypair": {"name": "k", "user_id": "user-b"}})
    assert "('user_id' was unexpected)" in other_user.json()["badRequest"]["message"]
    wrong_type = v22.post("/v2.1/os-keypairs", json={"keypair": {"name": "k", "type": "rsa"}})
    assert wrong_type.json() == {"badRequest": {"code": 400, "message":
        "Invalid input for field/attribute type. Value: rsa. 'rsa' is not one of ['ssh', 'x509']"}}
    bad_key = v22.post("/v2.1/os-keypairs", json={"keypair": {"name": "k", "public_key": "ssh-rsa AAAA"}})
    assert bad_key.json() == {"badRequest": {"code": 400, "message":
                                             "Keypair data is invalid: failed to generate fingerprint"}}
    missing = v22.post("/v2.1/os-keypairs", json={"keypair": {}})
    assert missing.json()["badRequest"]["message"] == (
        "Invalid input for field/attribute keypair. Value: {}. 'name' is a required property")
    assert v22.get("/v2.1/os-keypairs").json() == {"keypairs": []}


def test_show_and_delete_by_version(compute: ComputeServer) -> None:
    v22 = compute.client("2.2", token=USER_A)
    public_key = _ssh_public_key()
    assert v22.post("/v2.1/os-keypairs", json={"keypair": {"name": "k", "public_key": public_key}}).status_code == 201
    shown = v22.get("/v2.1/os-keypairs/k").json()["keypair"]
    assert set(shown) == {"name", "public_key", "fingerprint", "user_id", "created_at", "deleted", "deleted_at",
                          "id", "updated_at", "type"}
    assert shown["deleted"] is False and shown["deleted_at"] is None and shown["updated_at"] is None
    assert isinstance(shown["id"], int)
    assert datetime.datetime.strptime(shown["created_at"], "%Y-%m-%dT%H:%M:%S.%f")
    old = compute.client("2.1", token=USER_A).get("/v2.1/os-keypairs/k").json()["keypair"]
    assert "type" not in old and old["id"] == shown["id"]
    # Another user's key pair is not found.
    missing = compute.client("2.2", token=USER_B).get("/v2.1/os-keypairs/k")
    assert missing.status_code == 404
    assert missing.json() == {"itemNotFound": {"code": 404, "message": "Keypair k not found for user user-b"}}
    assert compute.client("2.1", token=USER_A).delete("/v2.1/os-keypairs/k").status_code == 202
    assert v22.post("/v2.1/os-keypairs", json={"keypair": {"name": "k", "public_key": public_key}}).status_code == 201
    assert v22.delete("/v2.1/os-keypairs/k").status_code == 204
    gone = v22.delete("/v2.1/os-keypairs/k")
    assert gone.json() == {"itemNotFound": {"code": 404, "message": "Keypair k not found for user user-a"}}


def test_admins_manage_other_users_keypairs_from_2_10(compute: ComputeServer) -> None:
    admin = compute.client("2.10")
    created = admin.post("/v2.1/os-keypairs", json={"keypair": {"name": "theirs", "user_id": "user-b",
                                                                "public_key": _ssh_public_key()}})
    assert created.status_code == 201 and created.json()["keypair"]["user_id"] == "user-b"
    assert [k["keypair"]["name"] for k in admin.get("/v2.1/os-keypairs?user_id=user-b").json()["keypairs"]] == [
        "theirs"]
    assert admin.get("/v2.1/os-keypairs").json() == {"keypairs": []}
    assert compute.client("2.10", token=USER_B).get("/v2.1/os-keypairs/theirs").status_code == 200
    # Before 2.10 the parameter is ignored: the admin's own key pairs.
    assert compute.client("2.9").get("/v2.1/os-keypairs?user_id=user-b").json() == {"keypairs": []}
    refused = compute.client("2.10", token=USER_A).get("/v2.1/os-keypairs?user_id=user-b")
    assert refused.status_code == 403
    assert refused.json() == {"forbidden": {"code": 403, "message":
                                            "Policy doesn't allow os_compute_api:os-keypairs:index to be performed."}}
    for method in ("get", "delete"):
        resp = getattr(compute.client("2.10", token=USER_A), method)("/v2.1/os-keypairs/theirs?user_id=user-b")
        assert resp.status_code == 403
    made = compute.client("2.10", token=USER_A).post(
        "/v2.1/os-keypairs", json={"keypair": {"name": "x", "user_id": "user-b"}})
    assert made.json()["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:os-keypairs:create to be performed.")
    assert admin.delete("/v2.1/os-keypairs/theirs?user_id=user-b").status_code == 204
    assert admin.get("/v2.1/os-keypairs?user_id=user-b").json() == {"keypairs": []}


def test_paging_from_2_35(compute: ComputeServer) -> None:
    client = compute.client("2.35", token=USER_A)
    for name in ("c", "a", "d", "b"):
        assert client.post("/v2.1/os-keypairs", json={"keypair": {"name": name, "public_key": _ssh_public_key()}}
                           ).status_code == 201
    page = client.get("/v2.1/os-keypairs?limit=2").json()
    assert [k["keypair"]["name"] for k in page["keypairs"]] == ["a", "b"]
    assert page["keypairs_links"] == [
        {"rel": "next", "href": f"{compute.url}/v2.1/os-keypairs?limit=2&marker=b"}]
    rest = client.get("/v2.1/os-keypairs?limit=2&marker=b").json()
    assert [k["keypair"]["name"] for k in rest["keypairs"]] == ["c", "d"]
    assert rest["keypairs_links"][0]["href"] == f"{compute.url}/v2.1/os-keypairs?limit=2&marker=d"
    last = client.get("/v2.1/os-keypairs?limit=2&marker=d").json()
    assert last == {"keypairs": []}
    assert "keypairs_links" not in client.get("/v2.1/os-keypairs?marker=a").json()
    in_project = client.get("/v2.1/project-a/os-keypairs?limit=1").json()["keypairs_links"][0]["href"]
    assert in_project == f"{compute.url}/v2.1/project-a/os-keypairs?limit=1&marker=a"
    unknown = client.get("/v2.1/os-keypairs?marker=zz")
    assert unknown.json() == {"badRequest": {"code": 400, "message": "Marker zz could not be found."}}
    negative = client.get("/v2.1/os-keypairs?limit=-1")
    assert negative.json() == {"badRequest": {"code": 400, "message":
        "Invalid input for query parameters limit. Value: -1. '-1' does not match '^[0-9]*$'"}}
    # Before 2.35 paging parameters are ignored.
    everything = compute.client("2.34", token=USER_A).get("/v2.1/os-keypairs?limit=1&marker=zz").json()
    assert [k["keypair"]["name"] for k in everything["keypairs"]] == ["a", "b", "c", "d"]


def test_key_pairs_quota_per_user(compute: ComputeServer) -> None:
    admin = compute.client("2.73")
    assert admin.put("/v2.1/os-quota-sets/project-a", json={"quota_set": {"key_pairs": 2}}).status_code == 200
    a = compute.client("2.73", token=USER_A)
    for name in ("one", "two"):
        assert a.post("/v2.1/os-keypairs", json={"keypair": {"name": name, "public_key": _ssh_public_key()}}
                      ).status_code == 201
    over = a.post("/v2.1/os-keypairs", json={"keypair": {"name": "three"}})
    assert over.status_code == 403
    assert over.json() == {"forbidden": {"code": 403, "message": "Quota exceeded, too many key pairs."}}
    assert len(a.get("/v2.1/os-keypairs").json()["keypairs"]) == 2
    # The quota is per user: another user of the project still has room.
    b = compute.client("2.73", token=USER_B)
    assert b.post("/v2.1/os-keypairs", json={"keypair": {"name": "one", "public_key": _ssh_public_key()}}
                  ).status_code == 201
    absolute = a.get("/v2.1/limits").json()["limits"]["absolute"]
    assert absolute["maxTotalKeypairs"] == 2
    detail = admin.get("/v2.1/os-quota-sets/project-a/detail").json()["quota_set"]
    assert detail["key_pairs"] == {"in_use": 0, "limit": 2, "reserved": 0}
