"""Error bodies exactly as upstream Placement words them: missing things and refused identities."""

from __future__ import annotations

import pytest

MISSING = "22222222-2222-2222-2222-222222222222"
NOT_FOUND = "The resource could not be found.\n\n {}  "
FORBIDDEN = "Access was denied to this resource.\n\n {}  "
NO_PROVIDER = f"No resource provider with uuid {MISSING} found"
INVENTORY = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}

# (method, path, body, detail) for every route that can miss a provider.
MISSING_PROVIDER = [
    ("GET", f"/resource_providers/{MISSING}", None, NO_PROVIDER),
    ("PUT", f"/resource_providers/{MISSING}", {"name": "x"}, NO_PROVIDER),
    ("DELETE", f"/resource_providers/{MISSING}", None, f"No resource provider with uuid {MISSING} found for delete"),
    ("GET", f"/resource_providers/{MISSING}/inventories", None, f"{NO_PROVIDER} : {NO_PROVIDER}"),
    ("PUT", f"/resource_providers/{MISSING}/inventories", INVENTORY, NO_PROVIDER),
    ("DELETE", f"/resource_providers/{MISSING}/inventories", None, NO_PROVIDER),
    ("POST", f"/resource_providers/{MISSING}/inventories",
     {"resource_provider_generation": 0, "resource_class": "VCPU", "total": 8}, NO_PROVIDER),
    ("GET", f"/resource_providers/{MISSING}/inventories/VCPU", None, f"{NO_PROVIDER} : {NO_PROVIDER}"),
    ("PUT", f"/resource_providers/{MISSING}/inventories/VCPU", {"resource_provider_generation": 0, "total": 8},
     NO_PROVIDER),
    ("DELETE", f"/resource_providers/{MISSING}/inventories/VCPU", None, NO_PROVIDER),
    ("GET", f"/resource_providers/{MISSING}/traits", None, f"{NO_PROVIDER}: {NO_PROVIDER}"),
    ("PUT", f"/resource_providers/{MISSING}/traits", {"resource_provider_generation": 0, "traits": []}, NO_PROVIDER),
    ("DELETE", f"/resource_providers/{MISSING}/traits", None, NO_PROVIDER),
    ("GET", f"/resource_providers/{MISSING}/aggregates", None, NO_PROVIDER),
    ("PUT", f"/resource_providers/{MISSING}/aggregates", {"resource_provider_generation": 0, "aggregates": []},
     NO_PROVIDER),
    ("GET", f"/resource_providers/{MISSING}/usages", None, f"{NO_PROVIDER}: {NO_PROVIDER}"),
    ("GET", f"/resource_providers/{MISSING}/allocations", None,
     f"Resource provider '{MISSING}' not found: {NO_PROVIDER}"),
]


def _error(response) -> dict:
    errors = response.json()["errors"]
    assert len(errors) == 1
    return {key: value for key, value in errors[0].items() if key != "request_id"}


def _not_found(detail: str) -> dict:
    return {"status": 404, "title": "Not Found", "detail": NOT_FOUND.format(detail),
            "code": "placement.undefined_code"}


@pytest.mark.parametrize(("method", "path", "body", "detail"), MISSING_PROVIDER)
def test_missing_provider_is_worded_per_route(placement, method: str, path: str, body, detail: str) -> None:
    response = placement.client("1.39").request(method, path, json=body)
    assert response.status_code == 404
    assert _error(response) == _not_found(detail)


BAD_REQUEST = (
    "The server could not comply with the request since it is either malformed or otherwise incorrect.\n\n {}  "
)


def _bad_request(detail: str) -> dict:
    return {"status": 400, "title": "Bad Request", "detail": BAD_REQUEST.format(detail),
            "code": "placement.undefined_code"}


def test_missing_inventories_classes_and_traits(placement) -> None:
    client = placement.client("1.39")
    rp = client.post("/resource_providers", json={"name": "rp"}).json()["uuid"]
    client.put(f"/resource_providers/{rp}/inventories", json=INVENTORY)
    generation = {"resource_provider_generation": 1}
    cases = [
        ("GET", f"/resource_providers/{rp}/inventories/DISK_GB", None,
         _not_found(f"No inventory of class DISK_GB for {rp}")),
        ("PUT", f"/resource_providers/{rp}/inventories/DISK_GB", {**generation, "total": 8},
         _bad_request(f"No inventory record with resource class for resource provider {rp}: "
                      "No inventory of class DISK_GB found.")),
        ("DELETE", f"/resource_providers/{rp}/inventories/DISK_GB", None,
         _not_found("No inventory of class DISK_GB found for delete: No inventory of class DISK_GB found for delete")),
        ("GET", f"/resource_providers/{rp}/inventories/CUSTOM_NOPE", None,
         _not_found(f"No inventory of class CUSTOM_NOPE for {rp}")),
        ("PUT", f"/resource_providers/{rp}/inventories/CUSTOM_NOPE", {**generation, "total": 8},
         _not_found("No such resource class CUSTOM_NOPE.")),
        ("DELETE", f"/resource_providers/{rp}/inventories/CUSTOM_NOPE", None,
         _not_found("No inventory of class CUSTOM_NOPE found for delete: No such resource class CUSTOM_NOPE.")),
        ("PUT", f"/resource_providers/{rp}/inventories", {**generation, "inventories": {"CUSTOM_NOPE": {"total": 8}}},
         _bad_request(f"Unknown resource class in inventory for resource provider {rp}: "
                      "No such resource class CUSTOM_NOPE.")),
        ("PUT", f"/resource_providers/{rp}/traits", {**generation, "traits": ["CUSTOM_NOPE"]},
         _bad_request("No such trait CUSTOM_NOPE")),
        ("GET", "/resource_classes/CUSTOM_NOPE", None, _not_found("No such resource class CUSTOM_NOPE.")),
        ("DELETE", "/resource_classes/CUSTOM_NOPE", None, _not_found("No such resource class CUSTOM_NOPE.")),
        ("GET", "/resource_classes/VCPU_NOPE", None, _not_found("No such resource class VCPU_NOPE.")),
        ("GET", "/traits/CUSTOM_NOPE", None, _not_found("No such trait(s): CUSTOM_NOPE.")),
        ("DELETE", "/traits/CUSTOM_NOPE", None, _not_found("No such trait(s): CUSTOM_NOPE.")),
        ("GET", "/traits/HW_NOPE", None, _not_found("No such trait(s): HW_NOPE.")),
        ("DELETE", f"/allocations/{MISSING}", None, _not_found(f"No allocations for consumer '{MISSING}'")),
    ]
    for method, path, body, expected in cases:
        response = client.request(method, path, json=body)
        assert response.status_code == expected["status"], (method, path, response.text)
        assert _error(response) == expected, (method, path)


def test_empty_token_is_refused_by_policy_not_authentication(placement) -> None:
    nameless = placement.client("1.39", token="")
    refused = nameless.get("/resource_providers")
    assert refused.status_code == 403
    assert _error(refused) == {
        "status": 403, "title": "Forbidden", "code": "placement.undefined_code",
        "detail": FORBIDDEN.format("Policy does not allow placement:resource_providers:list to be performed."),
    }
    assert nameless.get("/").status_code == 200
    # Without the header at all it is still authentication that refuses.
    assert placement.client("1.39", token=None).get("/resource_providers").status_code == 401


def test_roles_header_replaces_the_token_roles(placement) -> None:
    service = placement.client("1.39", token="nova").with_headers(X_Roles="service")
    assert service.get("/resource_providers").status_code == 200
    reader = placement.client("1.39", token="admin").with_headers(X_Roles="reader")
    assert reader.get("/resource_providers").status_code == 403


# Upstream's schema, in its own key order, as its message shows it.
INVENTORY_SCHEMA_MESSAGE = (
    "JSON does not validate: 'resource_provider_generation' is a required property  "
    "Failed validating 'required' in schema:     {'type': 'object',      "
    "'properties': {'resource_provider_generation': {'type': 'integer'},  "
    "                   'total': {'type': 'integer',                         "
    "      'maximum': 2147483647,                               'minimum': 1},  "
    "                   'reserved': {'type': 'integer',                      "
    "            'maximum': 2147483647,                                  'minimum': 0},  "
    "                   'min_unit': {'type': 'integer',                      "
    "            'maximum': 2147483647,                                  'minimum': 1},  "
    "                   'max_unit': {'type': 'integer',                      "
    "            'maximum': 2147483647,                                  'minimum': 1},  "
    "                   'step_size': {'type': 'integer',                     "
    "              'maximum': 2147483647,                                   'minimum': 1},  "
    "                   'allocation_ratio': {'type': 'number',               "
    "                           'maximum': 3.40282e+38}},      'required': ['total', 'resource_provider_generation'],  "
    "    'additionalProperties': False}  On instance:     {'total': 1}"
)


def test_schema_errors_show_upstreams_schemas(placement) -> None:
    client = placement.client("1.39")
    rp = client.post("/resource_providers", json={"name": "rp"}).json()["uuid"]
    missing_generation = client.put(f"/resource_providers/{rp}/inventories/VCPU", json={"total": 1})
    assert _error(missing_generation) == _bad_request(INVENTORY_SCHEMA_MESSAGE)
    refused = placement.client("1.28").put(
        f"/allocations/{MISSING}", json={"allocations": {}, "project_id": "p", "user_id": "u"}
    )
    assert refused.status_code == 400
    assert (
        "'consumer_generation': {'type': ['integer', 'null'],                                             "
        "'additionalProperties': False}},      'additionalProperties': False,      'required': ['allocations',"
    ) in _error(refused)["detail"]


def test_inventory_records_as_upstream_validates_them(placement) -> None:
    client = placement.client("1.39")
    rp = client.post("/resource_providers", json={"name": "rp"}).json()["uuid"]
    # A generation inside a record is allowed (and ignored).
    record = {"total": 8, "resource_provider_generation": 7}
    stored = client.put(f"/resource_providers/{rp}/inventories",
                        json={"resource_provider_generation": 0, "inventories": {"VCPU": record}})
    assert stored.status_code == 200 and stored.json()["inventories"]["VCPU"]["total"] == 8
    # Names that cannot be classes are refused as unknown, whatever their records hold.
    for junk in ("junk", {"total": 0}, {"total": 1}):
        refused = client.put(f"/resource_providers/{rp}/inventories",
                             json={"resource_provider_generation": 1, "inventories": {"vcpu": junk}})
        assert _error(refused) == _bad_request(
            f"Unknown resource class in inventory for resource provider {rp}: No such resource class vcpu."
        )



@pytest.mark.parametrize("limit", ["cow", "-1", "0"])
def test_invalid_candidate_limit_is_worded_as_upstream(placement, limit: str) -> None:
    refused = placement.client("1.16").get(f"/allocation_candidates?resources=VCPU:1&limit={limit}")
    assert _error(refused) == {
        "status": 400, "title": "Bad Request",
        "detail": BAD_REQUEST.format(
            f"Invalid query string parameters: '{limit}' does not match '^[1-9][0-9]*$'  "
            "Failed validating 'pattern' in schema['properties']['limit']:     "
            "{'type': ['integer', 'string'],      'pattern': '^[1-9][0-9]*$',      'minimum': 1,      'minLength': 1}  "
            f"On instance['limit']:     '{limit}'"
        ),
    }
