"""inspection rules

Revision ID: bm0005_inspection_rules
Revises: bm0004_later_microversions
Create Date: 2026-11-26 01:20:00.000000
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = 'bm0005_inspection_rules'
down_revision = 'bm0004_later_microversions'
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql')


def upgrade() -> None:
    op.create_table('inspection_rules',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('description', sa.String(length=255), nullable=True),
    sa.Column('priority', sa.Integer(), server_default='0', nullable=False),
    sa.Column('sensitive', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('phase', sa.String(length=16), server_default='main', nullable=False),
    sa.Column('conditions', sa.Text(), nullable=True),
    sa.Column('actions', sa.Text(), nullable=True),
    sa.Column('created_at', TIMESTAMP, nullable=True),
    sa.Column('updated_at', TIMESTAMP, nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_inspection_rules')),
    sa.UniqueConstraint('uuid', name=op.f('uq_inspection_rules_uuid'))
    )


def downgrade() -> None:
    op.drop_table('inspection_rules')
