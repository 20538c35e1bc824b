"""ports, port groups, chassis, volume connectors and targets

Revision ID: bm0003_ports_chassis_volumes
Revises: bm0002
Create Date: 2026-11-26
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = 'bm0003_ports_chassis_volumes'
down_revision = 'bm0002'
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql')


def _timestamps() -> list[sa.Column]:
    return [sa.Column('created_at', TIMESTAMP, nullable=True), sa.Column('updated_at', TIMESTAMP, nullable=True)]


def upgrade() -> None:
    op.create_table('chassis',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('description', sa.String(length=255), nullable=True),
    sa.Column('extra', sa.Text(), nullable=True),
    *_timestamps(),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_chassis')),
    sa.UniqueConstraint('uuid', name=op.f('uq_chassis_uuid'))
    )
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('chassis_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key(batch_op.f('fk_nodes_chassis_id_chassis'), 'chassis', ['chassis_id'], ['id'])

    op.create_table('portgroups',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('node_id', sa.Integer(), nullable=False),
    sa.Column('address', sa.String(length=18), nullable=True),
    sa.Column('extra', sa.Text(), nullable=True),
    sa.Column('internal_info', sa.Text(), nullable=True),
    sa.Column('standalone_ports_supported', sa.Boolean(), nullable=False),
    sa.Column('mode', sa.String(length=255), nullable=True),
    sa.Column('properties', sa.Text(), nullable=True),
    sa.Column('physical_network', sa.String(length=64), nullable=True),
    sa.Column('category', sa.String(length=80), nullable=True),
    sa.Column('dynamic_portgroup', sa.Boolean(), nullable=False),
    *_timestamps(),
    sa.ForeignKeyConstraint(['node_id'], ['nodes.id'], name=op.f('fk_portgroups_node_id_nodes')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_portgroups')),
    sa.UniqueConstraint('address', name=op.f('uq_portgroups_address')),
    sa.UniqueConstraint('name', name=op.f('uq_portgroups_name')),
    sa.UniqueConstraint('uuid', name=op.f('uq_portgroups_uuid'))
    )
    with op.batch_alter_table('portgroups', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_portgroups_node_id'), ['node_id'], unique=False)

    op.create_table('ports',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('address', sa.String(length=18), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('node_id', sa.Integer(), nullable=False),
    sa.Column('portgroup_id', sa.Integer(), nullable=True),
    sa.Column('extra', sa.Text(), nullable=True),
    sa.Column('local_link_connection', sa.Text(), nullable=True),
    sa.Column('internal_info', sa.Text(), nullable=True),
    sa.Column('pxe_enabled', sa.Boolean(), nullable=False),
    sa.Column('physical_network', sa.String(length=64), nullable=True),
    sa.Column('is_smartnic', sa.Boolean(), nullable=False),
    sa.Column('description', sa.String(length=255), nullable=True),
    sa.Column('vendor', sa.String(length=32), nullable=True),
    sa.Column('category', sa.String(length=80), nullable=True),
    sa.Column('available_for_dynamic_portgroup', sa.Boolean(), nullable=False),
    *_timestamps(),
    sa.ForeignKeyConstraint(['node_id'], ['nodes.id'], name=op.f('fk_ports_node_id_nodes')),
    sa.ForeignKeyConstraint(['portgroup_id'], ['portgroups.id'], name=op.f('fk_ports_portgroup_id_portgroups')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_ports')),
    sa.UniqueConstraint('address', name=op.f('uq_ports_address')),
    sa.UniqueConstraint('name', name=op.f('uq_ports_name')),
    sa.UniqueConstraint('uuid', name=op.f('uq_ports_uuid'))
    )
    with op.batch_alter_table('ports', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ports_node_id'), ['node_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_ports_portgroup_id'), ['portgroup_id'], unique=False)

    op.create_table('volume_connectors',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('node_id', sa.Integer(), nullable=False),
    sa.Column('type', sa.String(length=32), nullable=False),
    sa.Column('connector_id', sa.String(length=255), nullable=False),
    sa.Column('extra', sa.Text(), nullable=True),
    *_timestamps(),
    sa.ForeignKeyConstraint(['node_id'], ['nodes.id'], name=op.f('fk_volume_connectors_node_id_nodes')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_volume_connectors')),
    sa.UniqueConstraint('type', 'connector_id', name=op.f('uq_volume_connectors_type_connector_id')),
    sa.UniqueConstraint('uuid', name=op.f('uq_volume_connectors_uuid'))
    )
    with op.batch_alter_table('volume_connectors', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_volume_connectors_node_id'), ['node_id'], unique=False)

    op.create_table('volume_targets',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('node_id', sa.Integer(), nullable=False),
    sa.Column('volume_type', sa.String(length=64), nullable=False),
    sa.Column('properties', sa.Text(), nullable=True),
    sa.Column('boot_index', sa.Integer(), nullable=False),
    sa.Column('volume_id', sa.String(length=36), nullable=False),
    sa.Column('extra', sa.Text(), nullable=True),
    *_timestamps(),
    sa.ForeignKeyConstraint(['node_id'], ['nodes.id'], name=op.f('fk_volume_targets_node_id_nodes')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_volume_targets')),
    sa.UniqueConstraint('node_id', 'boot_index', name=op.f('uq_volume_targets_node_id_boot_index')),
    sa.UniqueConstraint('uuid', name=op.f('uq_volume_targets_uuid'))
    )
