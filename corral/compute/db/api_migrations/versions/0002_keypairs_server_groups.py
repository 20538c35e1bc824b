"""key pairs and server groups

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-28
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def _timestamp() -> sa.types.TypeEngine:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql')


def upgrade() -> None:
    op.create_table('key_pairs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=255).with_variant(mysql.VARCHAR(length=255, collation='utf8mb4_bin'), 'mariadb').with_variant(mysql.VARCHAR(length=255, collation='utf8mb4_bin'), 'mysql'), nullable=False),
    sa.Column('user_id', sa.String(length=255), nullable=False),
    sa.Column('fingerprint', sa.String(length=255), nullable=True),
    sa.Column('public_key', sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mariadb').with_variant(mysql.MEDIUMTEXT(), 'mysql'), nullable=True),
    sa.Column('type', sa.String(length=4), nullable=False),
    sa.Column('created_at', _timestamp(), nullable=True),
    sa.Column('updated_at', _timestamp(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_key_pairs')),
    sa.UniqueConstraint('user_id', 'name', name=op.f('uq_key_pairs_user_id_name'))
    )
    op.create_table('instance_groups',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('project_id', sa.String(length=255), nullable=False),
    sa.Column('user_id', sa.String(length=255), nullable=True),
    sa.Column('policy', sa.String(length=255), nullable=False),
    sa.Column('rules', sa.Text(), nullable=True),
    sa.Column('created_at', _timestamp(), nullable=True),
    sa.Column('updated_at', _timestamp(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_groups')),
    sa.UniqueConstraint('uuid', name=op.f('uq_instance_groups_uuid'))
    )
    with op.batch_alter_table('instance_groups', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_instance_groups_project_id'), ['project_id'], unique=False)

    op.create_table('instance_group_member',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('group_id', sa.Integer(), nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=True),
    sa.Column('created_at', _timestamp(), nullable=True),
    sa.Column('updated_at', _timestamp(), nullable=True),
    sa.ForeignKeyConstraint(['group_id'], ['instance_groups.id'],
                            name=op.f('fk_instance_group_member_group_id_instance_groups'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_group_member')),
    sa.UniqueConstraint('group_id', 'instance_uuid', name=op.f('uq_instance_group_member_group_id_instance_uuid'))
    )
    with op.batch_alter_table('instance_group_member', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_instance_group_member_instance_uuid'), ['instance_uuid'], unique=False)


def downgrade() -> None:
    op.drop_table('instance_group_member')
    op.drop_table('instance_groups')
    op.drop_table('key_pairs')
