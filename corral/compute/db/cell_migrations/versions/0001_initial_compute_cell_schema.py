"""initial compute cell schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-24
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('compute_nodes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('hypervisor_hostname', sa.String(length=255), nullable=False),
    sa.Column('hypervisor_type', sa.String(length=255), nullable=False),
    sa.Column('vcpus', sa.Integer(), nullable=False),
    sa.Column('memory_mb', sa.Integer(), nullable=False),
    sa.Column('local_gb', sa.Integer(), nullable=False),
    sa.Column('vcpus_used', sa.Integer(), nullable=False),
    sa.Column('memory_mb_used', sa.Integer(), nullable=False),
    sa.Column('local_gb_used', sa.Integer(), nullable=False),
    sa.Column('cpu_allocation_ratio', sa.Float(), nullable=False),
    sa.Column('ram_allocation_ratio', sa.Float(), nullable=False),
    sa.Column('disk_allocation_ratio', sa.Float(), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_compute_nodes')),
    sa.UniqueConstraint('host', 'hypervisor_hostname', name=op.f('uq_compute_nodes_host_hypervisor_hostname')),
    sa.UniqueConstraint('uuid', name=op.f('uq_compute_nodes_uuid'))
    )
    op.create_table('instances',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('project_id', sa.String(length=255), nullable=False),
    sa.Column('user_id', sa.String(length=255), nullable=False),
    sa.Column('display_name', sa.String(length=255), nullable=True),
    sa.Column('display_description', sa.Text(), nullable=True),
    sa.Column('hostname', sa.String(length=255), nullable=True),
    sa.Column('host', sa.String(length=255), nullable=True),
    sa.Column('node', sa.String(length=255), nullable=True),
    sa.Column('availability_zone', sa.String(length=255), nullable=True),
    sa.Column('vm_state', sa.String(length=255), nullable=True),
    sa.Column('task_state', sa.String(length=255), nullable=True),
    sa.Column('power_state', sa.Integer(), nullable=True),
    sa.Column('memory_mb', sa.Integer(), nullable=False),
    sa.Column('vcpus', sa.Integer(), nullable=False),
    sa.Column('root_gb', sa.Integer(), nullable=False),
    sa.Column('ephemeral_gb', sa.Integer(), nullable=False),
    sa.Column('flavor', sa.Text(), nullable=False),
    sa.Column('flavorid', sa.String(length=255), nullable=False),
    sa.Column('image_ref', sa.String(length=255), nullable=True),
    sa.Column('key_name', sa.String(length=255), nullable=True),
    sa.Column('reservation_id', sa.String(length=255), nullable=True),
    sa.Column('launch_index', sa.Integer(), nullable=True),
    sa.Column('config_drive', sa.String(length=255), nullable=True),
    sa.Column('access_ip_v4', sa.String(length=39), nullable=True),
    sa.Column('access_ip_v6', sa.String(length=39), nullable=True),
    sa.Column('progress', sa.Integer(), nullable=True),
    sa.Column('user_data', sa.Text(), nullable=True),
    sa.Column('locked', sa.Boolean(), nullable=False),
    sa.Column('locked_by', sa.String(length=255), nullable=True),
    sa.Column('launched_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('terminated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('deleted', sa.Boolean(), nullable=False),
    sa.Column('deleted_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instances')),
    sa.UniqueConstraint('uuid', name=op.f('uq_instances_uuid'))
    )
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.create_index('ix_instances_created_at', ['created_at'], unique=False)
        batch_op.create_index('ix_instances_host_deleted', ['host', 'deleted'], unique=False)
        batch_op.create_index('ix_instances_project_id_deleted', ['project_id', 'deleted'], unique=False)

    op.create_table('services',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('binary', sa.String(length=255), nullable=False),
    sa.Column('topic', sa.String(length=255), nullable=True),
    sa.Column('report_count', sa.Integer(), nullable=False),
    sa.Column('disabled', sa.Boolean(), nullable=False),
    sa.Column('disabled_reason', sa.String(length=255), nullable=True),
    sa.Column('last_seen_up', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('forced_down', sa.Boolean(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_services')),
    sa.UniqueConstraint('host', 'binary', name=op.f('uq_services_host_binary')),
    sa.UniqueConstraint('uuid', name=op.f('uq_services_uuid'))
    )
    op.create_table('instance_metadata',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('value', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.ForeignKeyConstraint(['instance_uuid'], ['instances.uuid'], name=op.f('fk_instance_metadata_instance_uuid_instances'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_metadata')),
    sa.UniqueConstraint('instance_uuid', 'key', name=op.f('uq_instance_metadata_instance_uuid_key'))
    )
