"""The Image service's policy rules: upstream Glance's names and secure defaults.

Targets are images as Glance builds them: ``project_id`` and ``owner`` are
the image's owner, ``visibility`` its visibility, and ``member_id`` the
caller's project when the caller sees a shared image as one of its
members.  With ``[oslo_policy] enforce_new_defaults = False`` the
deprecated rules (Glance's old empty ``default``) also apply.
"""

from __future__ import annotations

from oslo_policy import policy

ADMIN = "rule:context_is_admin"
DEFAULT = "rule:default"
PROJECT_MEMBER = "role:member and project_id:%(project_id)s"
PROJECT_READER = "role:reader and project_id:%(project_id)s"
IMAGE_MEMBER = "project_id:%(member_id)s"
VISIBLE_TO_ALL = ("'community':%(visibility)s or 'public':%(visibility)s or 'shared':%(visibility)s")
ADMIN_OR_PROJECT_MEMBER = f"{ADMIN} or ({PROJECT_MEMBER})"
ADMIN_OR_PROJECT_READER = f"{ADMIN} or ({PROJECT_READER})"
ADMIN_OR_READER_GET_IMAGE = (f"{ADMIN} or (role:reader and (project_id:%(project_id)s or {IMAGE_MEMBER} "
                             f"or {VISIBLE_TO_ALL}))")
ADMIN_OR_MEMBER_DOWNLOAD_IMAGE = (f"{ADMIN} or (role:member and (project_id:%(project_id)s or {IMAGE_MEMBER} "
                                  f"or {VISIBLE_TO_ALL}))")
ADMIN_OR_MEMBER_CREATE_IMAGE = f"{ADMIN} or ({PROJECT_MEMBER} and project_id:%(owner)s)"
ADMIN_OR_SHARED_MEMBER = f"{ADMIN} or (role:member and {IMAGE_MEMBER})"
ADMIN_OR_READER_OR_SHARED_MEMBER = f"{ADMIN} or role:reader and (project_id:%(project_id)s or {IMAGE_MEMBER})"
SERVICE = "rule:service_api"

_REASON = "Glance's policies gained project scope and the member and reader roles."


def _rule(name: str, check_str: str, description: str, method: str, path: str) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name=name, check_str=check_str, description=description, scope_types=["project"],
        operations=[{"method": method, "path": path}],
        deprecated_rule=policy.DeprecatedRule(name=name, check_str=DEFAULT, deprecated_reason=_REASON,
                                              deprecated_since="W"),
    )


# (rule, default check string, description, method, path)
_RULES = [
    ("add_image", ADMIN_OR_MEMBER_CREATE_IMAGE, "Create an image.", "POST", "/v2/images"),
    ("delete_image", ADMIN_OR_PROJECT_MEMBER, "Delete an image.", "DELETE", "/v2/images/{image_id}"),
    ("get_image", ADMIN_OR_READER_GET_IMAGE, "Show an image.", "GET", "/v2/images/{image_id}"),
    ("get_images", ADMIN_OR_PROJECT_READER, "List images.", "GET", "/v2/images"),
    ("modify_image", ADMIN_OR_PROJECT_MEMBER, "Update an image.", "PATCH", "/v2/images/{image_id}"),
    ("publicize_image", ADMIN, "Make an image public.", "PATCH", "/v2/images/{image_id}"),
    ("communitize_image", ADMIN_OR_PROJECT_MEMBER, "Make an image a community image.", "PATCH",
     "/v2/images/{image_id}"),
    ("download_image", ADMIN_OR_MEMBER_DOWNLOAD_IMAGE, "Download an image's data.", "GET",
     "/v2/images/{image_id}/file"),
    ("upload_image", ADMIN_OR_PROJECT_MEMBER, "Upload an image's data.", "PUT", "/v2/images/{image_id}/file"),
    ("add_member", ADMIN_OR_PROJECT_MEMBER, "Share an image with a project.", "POST",
     "/v2/images/{image_id}/members"),
    ("delete_member", ADMIN_OR_PROJECT_MEMBER, "Stop sharing an image with a project.", "DELETE",
     "/v2/images/{image_id}/members/{member_id}"),
    ("get_member", ADMIN_OR_READER_OR_SHARED_MEMBER, "Show an image membership.", "GET",
     "/v2/images/{image_id}/members/{member_id}"),
    ("get_members", ADMIN_OR_READER_OR_SHARED_MEMBER, "List an image's members.", "GET",
     "/v2/images/{image_id}/members"),
    ("modify_member", ADMIN_OR_SHARED_MEMBER, "Accept or reject an image shared with the caller's project.", "PUT",
     "/v2/images/{image_id}/members/{member_id}"),
    ("deactivate", ADMIN_OR_PROJECT_MEMBER, "Deactivate an image.", "POST",
     "/v2/images/{image_id}/actions/deactivate"),
    ("reactivate", ADMIN_OR_PROJECT_MEMBER, "Reactivate an image.", "POST",
     "/v2/images/{image_id}/actions/reactivate"),
]


def rules() -> list[policy.RuleDefault]:
    base = [
        policy.RuleDefault(
            name="default", check_str="", description="The rule of policies that name none.",
            deprecated_rule=policy.DeprecatedRule(name="default", check_str=ADMIN, deprecated_reason=_REASON,
                                                  deprecated_since="U")),
        policy.RuleDefault(name="context_is_admin", check_str="role:admin", description="Who is an admin."),
        policy.RuleDefault(name="service_api", check_str="role:service or role:admin",
                           description="Service-to-service calls."),
        policy.DocumentedRuleDefault(
            name="stores_info_detail", check_str=f"{ADMIN} or {SERVICE}", scope_types=["project"],
            description="See the stores' details.", operations=[{"method": "GET", "path": "/v2/info/stores/detail"}]),
    ]
    return base + [_rule(*entry) for entry in _RULES]
