"""node lock generation: fences a conductor presumed dead

Revision ID: bm0006_node_lock_generation
Revises: bm0005_inspection_rules
Create Date: 2026-11-28 12:30:00.000000
"""

from alembic import op
import sqlalchemy as sa

revision = 'bm0006_node_lock_generation'
down_revision = 'bm0005_inspection_rules'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('nodes', sa.Column('lock_generation', sa.Integer(), server_default='0', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('nodes') as batch:
        batch.drop_column('lock_generation')
