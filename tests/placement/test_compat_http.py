"""HTTP rules upstream Placement applies on every route: 405, 406, content type, caching."""

from __future__ import annotations

from uuid import uuid4

import falcon.testing


def _detail(response) -> str:
    return response.json()["errors"][0]["detail"]


def test_wrong_method_lists_exactly_the_served_methods(placement) -> None:
    client = placement.client("1.39")
    at_root = client.delete("/")
    assert at_root.status_code == 405 and at_root.headers["allow"] == "GET"
    on_app = client.delete("/resource_providers")
    assert on_app.status_code == 405 and on_app.headers["allow"] == "GET, POST"
    assert "The method DELETE is not allowed for this resource." in _detail(on_app)
    options = client.request("OPTIONS", "/resource_providers")
    assert options.status_code == 405 and options.headers["allow"] == "GET, POST"
    assert "The method OPTIONS is not allowed for this resource." in _detail(options)


def test_accept_must_allow_json_on_json_gets(placement) -> None:
    client = placement.client("1.39")
    refused = client.get("/resource_providers", headers={"accept": "text/plain"})
    assert refused.status_code == 406 and "Only application/json is provided" in refused.text
    browser = client.get("/resource_providers",
                         headers={"accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"})
    assert browser.status_code == 200
    assert client.get("/", headers={"accept": "text/plain"}).status_code == 200


def test_body_without_content_type_is_400(placement) -> None:
    # In-process, so no server fills in a default content type.
    app = falcon.testing.TestClient(placement.app)
    headers = {"x-auth-token": "admin", "openstack-api-version": "placement 1.20"}
    missing = app.simulate_post("/resource_providers", body="I want a resource provider please", headers=headers)
    assert missing.status_code == 400
    assert "content-type header required" in missing.json["errors"][0]["detail"]
    empty = app.simulate_put("/resource_providers/d3a64825-8228-4ccb-8a6c-1c6d3eb6a3e8", headers=headers)
    assert empty.status_code == 415
    assert "The media type None is not supported, use application/json" in empty.json["errors"][0]["detail"]


def test_root_has_cache_headers_from_1_15(placement) -> None:
    assert "cache-control" not in placement.client("1.14").get("/").headers
    new = placement.client("1.15").get("/")
    assert new.headers["cache-control"] == "no-cache" and "last-modified" in new.headers


def test_error_body_follows_accept(placement) -> None:
    client = placement.client("1.39")
    page = client.get("/no-such-thing", headers={"accept": "text/html"})
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "The resource could not be found" in page.text
    tie = client.get("/no-such-thing", headers={"accept": "application/json, text/html"})
    assert tie.headers["content-type"].startswith("text/html")
    json_first = client.get("/no-such-thing", headers={"accept": "text/html;q=0.5, application/json"})
    assert json_first.json()["errors"][0]["status"] == 404
    plain = client.get("/resource_providers", headers={"accept": "text/plain"})
    assert plain.status_code == 406 and plain.headers["content-type"].startswith("text/plain")
    assert plain.text.startswith("406 Not Acceptable") and "Only application/json is provided" in plain.text
    bad_version = placement.client("0.5").get("/", headers={"accept": "text/html"})
    assert bad_version.status_code == 406 and "Unacceptable version header: 0.5" in bad_version.text
    for junk in ("garbage", "text/html;q=abc", ";;;"):
        response = client.get("/resource_providers", headers={"accept": junk})
        assert response.status_code < 500, (junk, response.text)


def test_version_errors_and_empty_segments_use_upstream_wording(placement) -> None:
    too_new = placement.client("1.40").get("/")
    assert too_new.status_code == 406
    assert _detail(too_new).endswith("\n\n Invalid microversion: Unacceptable version header: 1.40")
    bogus = placement.client("bogus").get("/")
    assert bogus.status_code == 400
    assert "Invalid microversion: invalid version string: bogus; invalid literal for int()" in _detail(bogus)
    empty = placement.client("1.6").get("/traits/")
    assert empty.status_code == 404 and _detail(empty) == "The resource could not be found.\n\n   "


def test_noauth_refusal_has_upstreams_bare_shape(placement) -> None:
    anonymous = placement.client("1.0", token=None)
    refused = anonymous.get("/resource_providers", headers={"accept": "application/json"})
    assert refused.status_code == 401
    assert refused.json()["message"].endswith("supply the credentials required.<br /><br />\n\n\n")
    page = anonymous.get("/resource_providers", headers={"accept": "text/html"})
    assert page.status_code == 401 and "<br /><br />\n\n\n\n </body>" in page.text


def test_inline_explanations_for_405_406_415(placement) -> None:
    client = placement.client("1.39")
    wrong = client.patch("/resource_providers", json={})
    assert _detail(wrong) == "The method PATCH is not allowed for this resource. \n\n The method specified is not allowed for this resource."
    assert client.post(f"/resource_providers/{uuid4()}").headers["allow"] == "GET, DELETE, PUT"
    early = placement.client("1.4").delete(f"/resource_providers/{uuid4()}/inventories")
    assert _detail(early) == "The method DELETE is not allowed for this resource. \n\n "
    media = client.post("/resource_providers", data="x", headers={"content-type": "text/plain"})
    assert media.status_code == 415
    assert _detail(media).startswith("The request media type text/plain is not supported by this server. \n\n ")
    version = placement.client("1.40").get("/")
    assert _detail(version).startswith("The resource could not be generated that was acceptable to your browser "
                                       "(content of type application/json. \n\n Invalid microversion:")


def test_empty_inventory_list_has_no_last_modified(placement) -> None:
    rp = placement.client("1.20").post("/resource_providers", json={"name": "rp"}).json()["uuid"]
    empty = placement.client("1.30").get(f"/resource_providers/{rp}/inventories")
    assert "last-modified" not in empty.headers and empty.headers["cache-control"] == "no-cache"
