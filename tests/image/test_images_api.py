"""Images through the API: create, show, list, update, delete, tags, actions, as Glance answers."""

from __future__ import annotations

import uuid

from tests.image.conftest import PATCH, ImageServer, active, create

ALICE = "project-alice"
BOB = "project-bob"


def test_versions_without_a_token_and_any_version_prefix(image_api: ImageServer) -> None:
    anonymous = image_api.client(roles=None).with_headers(X_Auth_Token=None)
    response = anonymous.get("/")
    assert response.status_code == 300
    versions = response.json()["versions"]
    assert [v["id"] for v in versions][:3] == ["v2.15", "v2.9", "v2.17"]
    assert {v["id"]: v["status"] for v in versions}["v2.17"] == "CURRENT"
    assert versions[0]["links"] == [{"rel": "self", "href": f"{image_api.url}/v2/"}]
    assert anonymous.get("/versions").status_code == 200
    assert anonymous.get("/v3/images").status_code == 300
    client = image_api.client(ALICE)
    image = create(client, name="via-v2.1")
    assert client.get(f"/v2.1/images/{image['id']}").json()["name"] == "via-v2.1"
    assert anonymous.get("/v2/images").status_code == 401


def test_create_shows_every_field_in_glance_order(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    response = client.post("/v2/images", json={"name": "cirros", "disk_format": "qcow2", "container_format": "bare",
                                               "tags": ["a", "b", "a"], "hw_disk_bus": "scsi", "min_ram": 64})
    assert response.status_code == 201
    image = response.json()
    assert response.headers["Location"] == f"{image_api.url}/v2/images/{image['id']}"
    assert response.headers["OpenStack-image-import-methods"] == "glance-direct,web-download"
    assert list(image) == ["hw_disk_bus", "name", "disk_format", "container_format", "visibility", "size",
                           "virtual_size", "status", "checksum", "protected", "min_ram", "min_disk", "owner",
                           "os_hidden", "os_hash_algo", "os_hash_value", "id", "created_at", "updated_at", "tags",
                           "self", "file", "schema"]
    assert (image["status"], image["visibility"], image["owner"], image["tags"]) == ("queued", "shared", ALICE,
                                                                                      ["a", "b"])
    assert image["self"] == f"/v2/images/{image['id']}" and image["schema"] == "/v2/schemas/image"
    assert image["created_at"].endswith("Z") and len(image["created_at"]) == 20


def test_create_refusals(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    bad = client.post("/v2/images", json={"disk_format": "floppy"})
    assert bad.status_code == 400
    assert bad.json()["message"].startswith("Provided object does not match schema 'image': 'floppy' is not one of")
    assert client.post("/v2/images", json={"color": 3}).status_code == 400
    for key, value, message in (("status", "active", "Attribute 'status' is read-only."),
                                ("checksum", "x", "Attribute 'checksum' is read-only."),
                                ("self", "x", "Attribute 'self' is read-only."),
                                ("location", "x", "Attribute 'location' is reserved."),
                                ("os_glance_x", "x", "Attribute 'os_glance_x' is reserved.")):
        response = client.post("/v2/images", json={key: value})
        assert response.status_code == 403, key
        assert message in response.json()["message"], (key, response.json())
    assert client.post("/v2/images", json={"status": "x"}).status_code == 400
    assert client.post("/v2/images", json={"a" * 256: "x"}).status_code == 400
    assert client.post("/v2/images", data=b"{", headers={"Content-Type": "application/json"}).status_code == 400
    assert client.post("/v2/images", json={"visibility": "public"}).status_code == 403
    assert client.post("/v2/images", json={"owner": BOB}).json()["message"] == (
        f"Access was denied to this resource.<br /><br />\nYou are not permitted to create images owned by '{BOB}'\n\n")
    assert client.post("/v2/images", json={"min_disk": -1}).json()["message"].startswith(
        "Invalid value '-1' for parameter 'min_disk': Cannot be a negative value")
    image_id = str(uuid.uuid4())
    create(client, id=image_id)
    assert client.post("/v2/images", json={"id": image_id}).status_code == 409
    assert client.delete(f"/v2/images/{image_id}").status_code == 204
    # A deleted image's id is never used again.
    assert client.post("/v2/images", json={"id": image_id}).status_code == 409
    reader = image_api.client(ALICE, roles="reader")
    assert reader.post("/v2/images", json={}).status_code == 403
    assert image_api.admin().post("/v2/images", json={"visibility": "public"}).status_code == 201


def test_a_project_never_sees_anothers_private_image(image_api: ImageServer) -> None:
    alice, bob = image_api.client(ALICE), image_api.client(BOB)
    private = create(alice, visibility="private", name="secret")
    shared = create(alice, name="shared-not-member")
    community = create(alice, visibility="community", name="community")
    public = create(image_api.admin(), visibility="public", name="public")
    for hidden in (private, shared):
        response = bob.get(f"/v2/images/{hidden['id']}")
        assert response.status_code == 404
        assert response.json()["message"] == f"No image found with ID {hidden['id']}<br /><br />\n\n\n"
        assert bob.patch(f"/v2/images/{hidden['id']}", json=[], headers=PATCH).status_code == 404
        assert bob.delete(f"/v2/images/{hidden['id']}").status_code == 404
    names = {i["name"] for i in bob.get("/v2/images").json()["images"]}
    assert names == {"public"}
    assert {i["name"] for i in bob.get("/v2/images?visibility=community").json()["images"]} == {"community"}
    assert bob.get(f"/v2/images/{community['id']}").status_code == 200
    assert bob.get(f"/v2/images/{public['id']}").status_code == 200
    assert {i["name"] for i in alice.get("/v2/images").json()["images"]} == {
        "secret", "shared-not-member", "community", "public"}
    # The owner may not delete what another project cannot even see (bob gets 404 above);
    # an admin sees everything.
    assert {i["name"] for i in image_api.admin().get("/v2/images?visibility=all").json()["images"]} == {
        "secret", "shared-not-member", "community", "public"}


def test_list_filters_sorting_and_paging(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    made = [create(client, name=f"img-{n}", min_ram=n, tags=["even"] if n % 2 == 0 else ["odd"], kind=f"k{n % 3}")
            for n in range(7)]
    first = client.get("/v2/images?limit=3")
    body = first.json()
    assert [i["name"] for i in body["images"]] == ["img-6", "img-5", "img-4"]
    assert body["first"] == "/v2/images?limit=3" and body["schema"] == "/v2/schemas/images"
    assert body["next"] == f"/v2/images?limit=3&marker={made[4]['id']}"
    walked = []
    url = "/v2/images?limit=3"
    while url:
        page = client.get(url).json()
        walked += [i["name"] for i in page["images"]]
        url = page.get("next")
    assert walked == [f"img-{n}" for n in range(6, -1, -1)]
    names = lambda query: [i["name"] for i in client.get(f"/v2/images?{query}").json()["images"]]
    assert names("sort=name:asc&limit=2") == ["img-0", "img-1"]
    assert names("sort_key=name&sort_dir=asc") == names("sort=name:asc") == [f"img-{n}" for n in range(7)]
    assert client.get("/v2/images?sort_key=min_ram").status_code == 400
    assert names("name=in:img-1,img-3") == ["img-3", "img-1"]
    assert names("tag=even&sort=name:asc") == ["img-0", "img-2", "img-4", "img-6"]
    assert names("kind=k1&sort=name:asc") == ["img-1", "img-4"]
    assert names("status=queued&limit=1") == ["img-6"]
    assert names("owner=nobody") == []
    errors = {
        "sort_key=bogus": "Invalid sort key: bogus.",
        "sort_dir=up": "Invalid sort direction: up",
        "limit=x": "limit param must be an integer",
        "limit=-1": "limit param must be positive",
        "visibility=everyone": "Invalid visibility value: everyone",
        "member_status=maybe": "Invalid status: maybe",
        "os_hidden=maybe": "Invalid value 'maybe' for 'os_hidden' filter.",
        "size_min=big": "Unable to filter on a range with a non-numeric value.",
        "created_at=gt:yesterday": 'Bad "created_at" query filter format.',
        f"marker={uuid.uuid4()}": "No image found with ID",
        "sort=name&sort_key=name": "Old and new sorting syntax cannot be combined",
        "name=like:x": "Unable to filter by unknown operator 'like'.",
    }
    for query, message in errors.items():
        response = client.get(f"/v2/images?{query}")
        assert response.status_code == 400, query
        assert message in response.json()["message"], (query, response.json())


def test_os_hidden_images_are_left_out_unless_asked(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    create(client, name="hidden", os_hidden=True)
    create(client, name="shown")
    assert [i["name"] for i in client.get("/v2/images").json()["images"]] == ["shown"]
    assert [i["name"] for i in client.get("/v2/images?os_hidden=true").json()["images"]] == ["hidden"]


def test_patch_add_replace_remove_and_read_only_refusals(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    image = create(client, name="before", color="red")
    path = f"/v2/images/{image['id']}"
    response = client.patch(path, headers=PATCH, json=[
        {"op": "replace", "path": "/name", "value": "after"},
        {"op": "add", "path": "/size_hint", "value": "10"},
        {"op": "remove", "path": "/color"},
        {"op": "replace", "path": "/tags", "value": ["x", "y"]},
        {"op": "replace", "path": "/min_disk", "value": 2},
    ])
    assert response.status_code == 200, response.text
    changed = response.json()
    assert (changed["name"], changed["size_hint"], changed["tags"], changed["min_disk"]) == ("after", "10",
                                                                                             ["x", "y"], 2)
    assert "color" not in changed
    old_style = client.patch(path, headers={"Content-Type": "application/openstack-images-v2.0-json-patch"},
                             json=[{"replace": "/name", "value": "draft4"}])
    assert old_style.json()["name"] == "draft4"
    refusals = [
        ([{"op": "replace", "path": "/status", "value": "active"}], 403, "Attribute 'status' is read-only."),
        ([{"op": "replace", "path": "/id", "value": "x"}], 403, "Attribute 'id' is read-only."),
        ([{"op": "add", "path": "/location", "value": "x"}], 403, "Attribute 'location' is reserved."),
        ([{"op": "remove", "path": "/name"}], 403, "Property name may not be removed."),
        ([{"op": "remove", "path": "/nothing"}], 409, "Property nothing does not exist."),
        ([{"op": "replace", "path": "/nothing", "value": "x"}], 409, "Property nothing does not exist."),
        ([{"op": "replace", "path": "/owner", "value": BOB}], 403, "Owner can't be updated by non admin."),
        ([{"op": "replace", "path": "/visibility", "value": "public"}], 403,
         "You are not authorized to complete publicize_image action."),
        ([{"op": "move", "path": "/name"}], 400, "Invalid operation: `move`."),
        ([{"op": "replace", "path": "/a/b", "value": "x"}], 400, "Invalid JSON pointer for this resource: '/a/b'"),
        ([{"op": "replace", "path": "name", "value": "x"}], 400, 'Pointer `name` does not start with "/".'),
        ([{"op": "replace", "path": "/name"}], 400, 'Operation "replace" requires a member named "value".'),
        ([{"op": "replace", "path": "/min_ram", "value": "many"}], 400, "Provided object does not match schema"),
        ({"op": "replace"}, 400, "Request body must be a JSON array of operation objects."),
    ]
    for body, status, message in refusals:
        response = client.patch(path, headers=PATCH, json=body)
        assert response.status_code == status, (body, response.text)
        assert message in response.json()["message"], (body, response.json())
    assert client.get(path).json()["name"] == "draft4"
    wrong_type = client.patch(path, json=[])
    assert wrong_type.status_code == 415
    assert wrong_type.headers["Accept-Patch"] == ("application/openstack-images-v2.0-json-patch, "
                                                 "application/openstack-images-v2.1-json-patch")
    admin_made_public = image_api.admin().patch(path, headers=PATCH, json=[
        {"op": "replace", "path": "/visibility", "value": "public"}])
    assert admin_made_public.json()["visibility"] == "public"


def test_delete_protected_tags_and_actions(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    image = active(client, protected=True)
    path = f"/v2/images/{image['id']}"
    refused = client.delete(path)
    assert refused.status_code == 403
    assert refused.json()["message"].startswith(f"Image {image['id']} is protected and cannot be deleted.")
    assert client.put(f"{path}/tags/blue").status_code == 204
    assert client.put(f"{path}/tags/blue").status_code == 204
    assert client.get(path).json()["tags"] == ["blue"]
    assert client.delete(f"{path}/tags/none").status_code == 404
    assert client.delete(f"{path}/tags/blue").status_code == 204
    assert client.get(path).json()["tags"] == []
    assert client.post(f"{path}/actions/deactivate").status_code == 204
    assert client.get(path).json()["status"] == "deactivated"
    refused = client.get(f"{path}/file")
    assert refused.status_code == 403
    assert "has been deactivated" in refused.json()["message"]
    assert image_api.admin().get(f"{path}/file").status_code == 200
    assert client.post(f"{path}/actions/reactivate").status_code == 204
    assert client.get(f"{path}/file").status_code == 200
    queued = create(client)
    assert client.post(f"/v2/images/{queued['id']}/actions/deactivate").status_code == 403
    client.patch(path, headers=PATCH, json=[{"op": "replace", "path": "/protected", "value": False}])
    assert client.delete(path).status_code == 204
    assert client.get(path).status_code == 404
    assert image_api.stored_files() == []


def test_schemas(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    image = client.get("/v2/schemas/image").json()
    assert image["name"] == "image" and image["additionalProperties"] == {"type": "string"}
    assert image["properties"]["disk_format"]["enum"][0] is None
    assert "qcow2" in image["properties"]["disk_format"]["enum"]
    assert client.get("/v2/schemas/images").json()["properties"]["images"]["items"]["name"] == "image"
    assert client.get("/v2/schemas/member").json()["properties"]["status"]["enum"] == ["pending", "accepted",
                                                                                       "rejected"]
    assert client.get("/v2/schemas/members").json()["name"] == "members"
    assert client.get("/v2/info/import").json()["import-methods"]["value"] == ["glance-direct", "web-download"]


def test_bad_input_never_answers_500(image_api: ImageServer) -> None:
    client = image_api.client(ALICE)
    image = create(client)
    for method, path, body in (
            ("POST", "/v2/images", b"[]"), ("POST", "/v2/images", b'"x"'), ("POST", "/v2/images", b"null"),
            ("PATCH", f"/v2/images/{image['id']}", b"[1]"), ("PATCH", f"/v2/images/{image['id']}", b'[{"op": 1}]'),
            ("PATCH", f"/v2/images/{image['id']}", b'[{"op": "add", "path": 5, "value": 1}]'),
            ("POST", f"/v2/images/{image['id']}/members", b'{"member": 5}'),
            ("POST", f"/v2/images/{image['id']}/members", b"[]"),
            ("POST", f"/v2/images/{image['id']}/import", b'{"method": "x"}'),
            ("GET", "/v2/images?created_at=gt:2020-13-45T00:00:00Z", None)):
        headers = PATCH if method == "PATCH" else {"Content-Type": "application/json"}
        response = client.request(method, path, data=body, headers=headers)
        assert 400 <= response.status_code < 500, (method, path, body, response.status_code, response.text)
    # A limit beyond api_limit_max is capped, as upstream caps it.
    assert client.get("/v2/images?limit=99999999999999999999").status_code == 200
