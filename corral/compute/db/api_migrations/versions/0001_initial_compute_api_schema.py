"""initial compute API schema

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
    op.create_table('aggregates',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_aggregates')),
    sa.UniqueConstraint('name', name=op.f('uq_aggregates_name')),
    sa.UniqueConstraint('uuid', name=op.f('uq_aggregates_uuid'))
    )
    op.create_table('build_requests',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('project_id', sa.String(length=255), nullable=False),
    sa.Column('instance', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_build_requests')),
    sa.UniqueConstraint('instance_uuid', name=op.f('uq_build_requests_instance_uuid'))
    )
    with op.batch_alter_table('build_requests', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_build_requests_project_id'), ['project_id'], unique=False)

    op.create_table('cell_mappings',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('transport_url', sa.Text(), nullable=False),
    sa.Column('database_connection', sa.Text(), nullable=False),
    sa.Column('disabled', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_cell_mappings')),
    sa.UniqueConstraint('uuid', name=op.f('uq_cell_mappings_uuid'))
    )
    op.create_table('flavors',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('flavorid', sa.String(length=255), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('memory_mb', sa.Integer(), nullable=False),
    sa.Column('vcpus', sa.Integer(), nullable=False),
    sa.Column('root_gb', sa.Integer(), nullable=False),
    sa.Column('ephemeral_gb', sa.Integer(), nullable=False),
    sa.Column('swap', sa.Integer(), nullable=False),
    sa.Column('rxtx_factor', sa.Float(), nullable=False),
    sa.Column('vcpu_weight', sa.Integer(), nullable=True),
    sa.Column('disabled', sa.Boolean(), nullable=False),
    sa.Column('is_public', sa.Boolean(), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_flavors')),
    sa.UniqueConstraint('flavorid', name=op.f('uq_flavors_flavorid')),
    sa.UniqueConstraint('name', name=op.f('uq_flavors_name'))
    )
    op.create_table('quotas',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.String(length=255), nullable=False),
    sa.Column('resource', sa.String(length=255), nullable=False),
    sa.Column('hard_limit', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_quotas')),
    sa.UniqueConstraint('project_id', 'resource', name=op.f('uq_quotas_project_id_resource'))
    )
    op.create_table('request_specs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('spec', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_request_specs')),
    sa.UniqueConstraint('instance_uuid', name=op.f('uq_request_specs_instance_uuid'))
    )
    op.create_table('aggregate_hosts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('aggregate_id', sa.Integer(), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.ForeignKeyConstraint(['aggregate_id'], ['aggregates.id'], name=op.f('fk_aggregate_hosts_aggregate_id_aggregates'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_aggregate_hosts')),
    sa.UniqueConstraint('aggregate_id', 'host', name=op.f('uq_aggregate_hosts_aggregate_id_host'))
    )
    op.create_table('aggregate_metadata',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('aggregate_id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('value', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.ForeignKeyConstraint(['aggregate_id'], ['aggregates.id'], name=op.f('fk_aggregate_metadata_aggregate_id_aggregates'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_aggregate_metadata')),
    sa.UniqueConstraint('aggregate_id', 'key', name=op.f('uq_aggregate_metadata_aggregate_id_key'))
    )
    op.create_table('flavor_extra_specs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('flavor_id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('value', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.ForeignKeyConstraint(['flavor_id'], ['flavors.id'], name=op.f('fk_flavor_extra_specs_flavor_id_flavors'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_flavor_extra_specs')),
    sa.UniqueConstraint('flavor_id', 'key', name=op.f('uq_flavor_extra_specs_flavor_id_key'))
    )
    op.create_table('flavor_projects',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('flavor_id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.ForeignKeyConstraint(['flavor_id'], ['flavors.id'], name=op.f('fk_flavor_projects_flavor_id_flavors'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_flavor_projects')),
    sa.UniqueConstraint('flavor_id', 'project_id', name=op.f('uq_flavor_projects_flavor_id_project_id'))
    )
    op.create_table('host_mappings',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('cell_id', sa.Integer(), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.ForeignKeyConstraint(['cell_id'], ['cell_mappings.id'], name=op.f('fk_host_mappings_cell_id_cell_mappings')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_host_mappings')),
    sa.UniqueConstraint('host', name=op.f('uq_host_mappings_host'))
    )
    with op.batch_alter_table('host_mappings', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_host_mappings_cell_id'), ['cell_id'], unique=False)

    op.create_table('instance_mappings',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('cell_id', sa.Integer(), nullable=True),
    sa.Column('project_id', sa.String(length=255), nullable=False),
    sa.Column('user_id', sa.String(length=255), nullable=True),
    sa.Column('queued_for_delete', sa.Boolean(), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.ForeignKeyConstraint(['cell_id'], ['cell_mappings.id'], name=op.f('fk_instance_mappings_cell_id_cell_mappings')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_mappings')),
    sa.UniqueConstraint('instance_uuid', name=op.f('uq_instance_mappings_instance_uuid'))
    )
    with op.batch_alter_table('instance_mappings', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_instance_mappings_cell_id'), ['cell_id'], unique=False)
        batch_op.create_index('ix_instance_mappings_project_id_qfd', ['project_id', 'queued_for_delete'], unique=False)

