"""Identity's tables (SQLAlchemy Core).

Ids are 32-character hex strings (the default domain's id is ``default``),
as Keystone's are.  Role assignments of users on projects, domains and the
system share one table keyed by ``(target_type, target_id, user_id,
role_id)``.  Revocation events carry what a token is matched on and the
microsecond time before which matching tokens were issued; the one-row
``revocation_versions`` table changes with every event, so a process can
tell with one read whether its copy of the events is still current.
"""

from __future__ import annotations

import sqlalchemy as sa

from corral.core.db import NAMING_CONVENTION, Timestamp, timestamp_columns

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

ID = sa.String(64)
NAME = sa.String(255)

domains = sa.Table(
    "domains",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("enabled", sa.Boolean, nullable=False),
    # Other attributes a client set, as JSON text.
    sa.Column("extra", sa.Text, nullable=False),
    *timestamp_columns(),
)

projects = sa.Table(
    "projects",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("domain_id", ID, sa.ForeignKey("domains.id"), nullable=False),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("tags", sa.Text, nullable=False),
    sa.Column("extra", sa.Text, nullable=False),
    *timestamp_columns(),
    sa.UniqueConstraint("domain_id", "name"),
)

users = sa.Table(
    "users",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("name", NAME, nullable=False),
    sa.Column("domain_id", ID, sa.ForeignKey("domains.id"), nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("default_project_id", ID, nullable=True),
    # NULL: the user cannot log in with a password (service users).
    sa.Column("password_hash", sa.String(255), nullable=True),
    sa.Column("password_created_at", Timestamp, nullable=True),
    sa.Column("extra", sa.Text, nullable=False),
    *timestamp_columns(),
    sa.UniqueConstraint("domain_id", "name"),
)

roles = sa.Table(
    "roles",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("name", NAME, nullable=False, unique=True),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("options", sa.Text, nullable=False),
    *timestamp_columns(),
)

implied_roles = sa.Table(
    "implied_roles",
    metadata,
    sa.Column("prior_role_id", ID, sa.ForeignKey("roles.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("implied_role_id", ID, sa.ForeignKey("roles.id", ondelete="CASCADE"), primary_key=True),
)

# target_type is "project", "domain" or "system" (target_id "all").
role_assignments = sa.Table(
    "role_assignments",
    metadata,
    sa.Column("target_type", sa.String(16), primary_key=True),
    sa.Column("target_id", ID, primary_key=True),
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("role_id", ID, sa.ForeignKey("roles.id", ondelete="CASCADE"), primary_key=True),
    sa.Index("ix_role_assignments_user_id", "user_id"),
    sa.Index("ix_role_assignments_role_id", "role_id"),
)

application_credentials = sa.Table(
    "application_credentials",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("name", NAME, nullable=False),
    sa.Column("secret_hash", sa.String(255), nullable=False),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    sa.Column("project_id", ID, nullable=True),
    sa.Column("system", sa.String(16), nullable=True),
    sa.Column("expires_at", Timestamp, nullable=True),
    sa.Column("unrestricted", sa.Boolean, nullable=False),
    sa.Column("created_at", Timestamp, nullable=True),
    sa.UniqueConstraint("user_id", "name"),
)

# (Short names: constraint names must fit in 63 characters.)
app_credential_roles = sa.Table(
    "app_credential_roles",
    metadata,
    sa.Column("credential_id", ID, sa.ForeignKey("application_credentials.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("role_id", ID, sa.ForeignKey("roles.id", ondelete="CASCADE"), primary_key=True),
)

# kind and subject/scope: see corral.identity.domain.revocation.
revocation_events = sa.Table(
    "revocation_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("subject", NAME, nullable=False),
    sa.Column("scope", ID, nullable=True),
    # Microseconds since the epoch: tokens issued at or before it are refused.
    sa.Column("issued_before", sa.BigInteger, nullable=False),
    # Microseconds since the epoch after which no token the event matches can be valid.
    sa.Column("prune_after", sa.BigInteger, nullable=False, index=True),
)

revocation_versions = sa.Table(
    "revocation_versions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("version", sa.String(32), nullable=False),
)
