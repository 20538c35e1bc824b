"""allocations

Revision ID: bm0002
Revises: bm0001
Create Date: 2026-11-25
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = 'bm0002'
down_revision = 'bm0001'
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql')


def upgrade() -> None:
    op.create_table('allocations',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('node_id', sa.Integer(), nullable=True),
    sa.Column('state', sa.String(length=15), nullable=False),
    sa.Column('owner', sa.String(length=255), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('resource_class', sa.String(length=80), nullable=True),
    sa.Column('candidate_nodes', sa.Text(), nullable=True),
    sa.Column('extra', sa.Text(), nullable=True),
    sa.Column('conductor_affinity', sa.Integer(), nullable=True),
    sa.Column('created_at', TIMESTAMP, nullable=True),
    sa.Column('updated_at', TIMESTAMP, nullable=True),
    sa.ForeignKeyConstraint(['node_id'], ['nodes.id'], name=op.f('fk_allocations_node_id_nodes'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['conductor_affinity'], ['conductors.id'], name=op.f('fk_allocations_conductor_affinity_conductors')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_allocations')),
    sa.UniqueConstraint('name', name=op.f('uq_allocations_name')),
    sa.UniqueConstraint('uuid', name=op.f('uq_allocations_uuid'))
    )
    with op.batch_alter_table('allocations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_allocations_state_conductor_affinity'), ['state', 'conductor_affinity'], unique=False)
        batch_op.create_index(batch_op.f('ix_allocations_node_id'), ['node_id'], unique=False)

    op.create_table('allocation_traits',
    sa.Column('allocation_id', sa.Integer(), nullable=False),
    sa.Column('trait', sa.String(length=255), nullable=False),
    sa.Column('position', sa.Integer(), server_default='0', nullable=False),
    sa.Column('created_at', TIMESTAMP, nullable=True),
    sa.Column('updated_at', TIMESTAMP, nullable=True),
    sa.ForeignKeyConstraint(['allocation_id'], ['allocations.id'], name=op.f('fk_allocation_traits_allocation_id_allocations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('allocation_id', 'trait', name=op.f('pk_allocation_traits'))
    )
