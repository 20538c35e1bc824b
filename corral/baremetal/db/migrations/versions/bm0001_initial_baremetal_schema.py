"""initial baremetal schema

Revision ID: bm0001
Revises: 
Create Date: 2026-11-24
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = 'bm0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('conductors',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('hostname', sa.String(length=255), nullable=False),
    sa.Column('drivers', sa.Text(), nullable=True),
    sa.Column('online', sa.Boolean(), nullable=False),
    sa.Column('conductor_group', sa.String(length=255), server_default='', nullable=False),
    sa.Column('rpc_address', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_conductors')),
    sa.UniqueConstraint('hostname', name=op.f('uq_conductors_hostname'))
    )
    op.create_table('nodes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('driver', sa.String(length=255), nullable=False),
    sa.Column('driver_info', sa.Text(), nullable=True),
    sa.Column('driver_internal_info', sa.Text(), nullable=True),
    sa.Column('properties', sa.Text(), nullable=True),
    sa.Column('extra', sa.Text(), nullable=True),
    sa.Column('instance_info', sa.Text(), nullable=True),
    sa.Column('instance_uuid', sa.String(length=36), nullable=True),
    sa.Column('allocation_id', sa.Integer(), nullable=True),
    sa.Column('conductor_affinity', sa.Integer(), nullable=True),
    sa.Column('conductor_group', sa.String(length=255), server_default='', nullable=False),
    sa.Column('reservation', sa.String(length=255), nullable=True),
    sa.Column('power_state', sa.String(length=15), nullable=True),
    sa.Column('target_power_state', sa.String(length=15), nullable=True),
    sa.Column('provision_state', sa.String(length=15), nullable=False),
    sa.Column('target_provision_state', sa.String(length=15), nullable=True),
    sa.Column('provision_updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('maintenance', sa.Boolean(), nullable=False),
    sa.Column('maintenance_reason', sa.Text(), nullable=True),
    sa.Column('fault', sa.String(length=255), nullable=True),
    sa.Column('console_enabled', sa.Boolean(), nullable=False),
    sa.Column('clean_step', sa.Text(), nullable=True),
    sa.Column('deploy_step', sa.Text(), nullable=True),
    sa.Column('raid_config', sa.Text(), nullable=True),
    sa.Column('target_raid_config', sa.Text(), nullable=True),
    sa.Column('resource_class', sa.String(length=80), nullable=True),
    sa.Column('automated_clean', sa.Boolean(), nullable=True),
    sa.Column('protected', sa.Boolean(), nullable=False),
    sa.Column('protected_reason', sa.Text(), nullable=True),
    sa.Column('owner', sa.String(length=255), nullable=True),
    sa.Column('lessee', sa.String(length=255), nullable=True),
    sa.Column('retired', sa.Boolean(), nullable=False),
    sa.Column('retired_reason', sa.Text(), nullable=True),
    sa.Column('inspection_started_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('inspection_finished_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('bios_interface', sa.String(length=255), nullable=True),
    sa.Column('boot_interface', sa.String(length=255), nullable=True),
    sa.Column('console_interface', sa.String(length=255), nullable=True),
    sa.Column('deploy_interface', sa.String(length=255), nullable=True),
    sa.Column('firmware_interface', sa.String(length=255), nullable=True),
    sa.Column('inspect_interface', sa.String(length=255), nullable=True),
    sa.Column('management_interface', sa.String(length=255), nullable=True),
    sa.Column('network_interface', sa.String(length=255), nullable=True),
    sa.Column('power_interface', sa.String(length=255), nullable=True),
    sa.Column('raid_interface', sa.String(length=255), nullable=True),
    sa.Column('rescue_interface', sa.String(length=255), nullable=True),
    sa.Column('storage_interface', sa.String(length=255), nullable=True),
    sa.Column('vendor_interface', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_nodes')),
    sa.UniqueConstraint('instance_uuid', name=op.f('uq_nodes_instance_uuid')),
    sa.UniqueConstraint('name', name=op.f('uq_nodes_name')),
    sa.UniqueConstraint('uuid', name=op.f('uq_nodes_uuid'))
    )
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_nodes_provision_state'), ['provision_state'], unique=False)
        batch_op.create_index(batch_op.f('ix_nodes_reservation'), ['reservation'], unique=False)

    op.create_table('bios_settings',
    sa.Column('node_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('value', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.ForeignKeyConstraint(['node_id'], ['nodes.id'], name=op.f('fk_bios_settings_node_id_nodes'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('node_id', 'name', name=op.f('pk_bios_settings'))
    )
    op.create_table('conductor_hardware_interfaces',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('conductor_id', sa.Integer(), nullable=False),
    sa.Column('hardware_type', sa.String(length=255), nullable=False),
    sa.Column('interface_type', sa.String(length=16), nullable=False),
    sa.Column('interface_name', sa.String(length=255), nullable=False),
    sa.Column('default', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.ForeignKeyConstraint(['conductor_id'], ['conductors.id'], name=op.f('fk_conductor_hardware_interfaces_conductor_id_conductors'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_conductor_hardware_interfaces')),
    sa.UniqueConstraint('conductor_id', 'hardware_type', 'interface_type', 'interface_name', name=op.f('uq_conductor_hardware_interfaces_conductor_id_hardware_type_interface_type_interface_name'))
    )
    op.create_table('node_traits',
    sa.Column('node_id', sa.Integer(), nullable=False),
    sa.Column('trait', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.Column('updated_at', sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql'), nullable=True),
    sa.ForeignKeyConstraint(['node_id'], ['nodes.id'], name=op.f('fk_node_traits_node_id_nodes'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('node_id', 'trait', name=op.f('pk_node_traits'))
    )
