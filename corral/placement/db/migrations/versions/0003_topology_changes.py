"""topology changes

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('topology_versions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('position', sa.BigInteger(), server_default='0', nullable=False))
    op.create_table('topology_changes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('position', sa.BigInteger(), nullable=False),
    sa.Column('resource_provider_id', sa.Integer(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_topology_changes'))
    )
    with op.batch_alter_table('topology_changes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_topology_changes_position'), ['position'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('topology_changes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_topology_changes_position'))
    op.drop_table('topology_changes')
    with op.batch_alter_table('topology_versions', schema=None) as batch_op:
        batch_op.drop_column('position')
