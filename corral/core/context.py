"""The typed request context handed to every handler as ``req.context``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from microversion_parse import Version


def new_request_id() -> str:
    return f"req-{uuid.uuid4()}"


@dataclass
class RequestContext:
    request_id: str = field(default_factory=new_request_id)
    user_id: str | None = None
    project_id: str | None = None
    roles: tuple[str, ...] = ()
    # "all" for system-scoped tokens, None for project-scoped ones.
    system_scope: str | None = None
    domain_id: str | None = None
    authenticated: bool = False
    version: Version | None = None
    # The request body, read once (bounded by the service's size limit)
    # when the request arrives, so that it can be checked at the edge.
    body: bytes | None = None
    # Free-form values a service keeps for the rest of the request
    # (for example the raw query string it already parsed).
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles

    def policy_credentials(self) -> dict[str, Any]:
        """The credential dict oslo.policy evaluates rules against."""
        return {
            "user_id": self.user_id,
            "project_id": self.project_id,
            "roles": list(self.roles),
            "system_scope": self.system_scope,
            # oslo.policy reads the token's scope from "system".
            "system": self.system_scope,
            "domain_id": self.domain_id,
            "is_admin": self.is_admin,
            "is_admin_project": True,
        }

    def at_least(self, major: int, minor: int) -> bool:
        return self.version is not None and self.version >= (major, minor)

    @classmethod
    def admin(cls) -> RequestContext:
        """A context for work Corral does on its own behalf (periodic tasks)."""
        return cls(user_id="corral", project_id=None, roles=("admin",), authenticated=True)
