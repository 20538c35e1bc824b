"""topology versions

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

import secrets

from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table('topology_versions',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('version', sa.String(length=32), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_topology_versions'))
    )
    op.bulk_insert(table, [{'id': 1, 'version': secrets.token_hex(16)}])


def downgrade() -> None:
    op.drop_table('topology_versions')
