"""instances.locked_reason; tags, faults, instance actions and events, tasks

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.add_column(sa.Column('locked_reason', sa.String(length=255), nullable=True))
    op.create_table('instance_actions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('action', sa.String(length=255), nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('request_id', sa.String(length=255), nullable=False),
    sa.Column('user_id', sa.String(length=255), nullable=True),
    sa.Column('project_id', sa.String(length=255), nullable=True),
    sa.Column('start_time', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('finish_time', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('message', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_actions'))
    )
    with op.batch_alter_table('instance_actions', schema=None) as batch_op:
        batch_op.create_index('ix_instance_actions_instance_uuid_updated_at', ['instance_uuid', 'updated_at'], unique=False)
        batch_op.create_index('ix_instance_actions_request_id', ['request_id'], unique=False)

    op.create_table('instance_faults',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('code', sa.Integer(), nullable=False),
    sa.Column('message', sa.String(length=255), nullable=True),
    sa.Column('details', sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mariadb').with_variant(mysql.MEDIUMTEXT(), 'mysql'), nullable=True),
    sa.Column('host', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_faults'))
    )
    with op.batch_alter_table('instance_faults', schema=None) as batch_op:
        batch_op.create_index('ix_instance_faults_instance_uuid', ['instance_uuid'], unique=False)

    op.create_table('instance_tasks',
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('task', sa.String(length=255), nullable=False),
    sa.Column('request_id', sa.String(length=255), nullable=False),
    sa.Column('params', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('instance_uuid', name=op.f('pk_instance_tasks'))
    )
    op.create_table('tags',
    sa.Column('resource_id', sa.String(length=36), nullable=False),
    sa.Column('tag', sa.String(length=60).with_variant(mysql.VARCHAR(collation='utf8mb4_bin', length=60), 'mariadb').with_variant(mysql.VARCHAR(collation='utf8mb4_bin', length=60), 'mysql'), nullable=False),
    sa.PrimaryKeyConstraint('resource_id', 'tag', name=op.f('pk_tags'))
    )
    with op.batch_alter_table('tags', schema=None) as batch_op:
        batch_op.create_index('ix_tags_tag', ['tag'], unique=False)

    op.create_table('instance_actions_events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('action_id', sa.Integer(), nullable=False),
    sa.Column('event', sa.String(length=255), nullable=False),
    sa.Column('start_time', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('finish_time', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('result', sa.String(length=255), nullable=True),
    sa.Column('traceback', sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mariadb').with_variant(mysql.MEDIUMTEXT(), 'mysql'), nullable=True),
    sa.Column('host', sa.String(length=255), nullable=True),
    sa.Column('details', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.ForeignKeyConstraint(['action_id'], ['instance_actions.id'], name=op.f('fk_instance_actions_events_action_id_instance_actions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_actions_events'))
    )
    with op.batch_alter_table('instance_actions_events', schema=None) as batch_op:
        batch_op.create_index('ix_instance_actions_events_action_id', ['action_id'], unique=False)

