"""node fields, history, inventory, firmware, deploy templates, runbooks, events

Revision ID: bm0004_later_microversions
Revises: bm0003_ports_chassis_volumes
Create Date: 2026-11-25 19:55:10.772196
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = 'bm0004_later_microversions'
down_revision = 'bm0003_ports_chassis_volumes'
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mariadb').with_variant(mysql.DATETIME(fsp=6), 'mysql')


def upgrade() -> None:
    op.create_table('deploy_templates',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('extra', sa.Text(), nullable=True),
    sa.Column('created_at', TIMESTAMP, nullable=True),
    sa.Column('updated_at', TIMESTAMP, nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_deploy_templates')),
    sa.UniqueConstraint('name', name=op.f('uq_deploy_templates_name')),
    sa.UniqueConstraint('uuid', name=op.f('uq_deploy_templates_uuid'))
    )
    op.create_table('events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('event', sa.String(length=64), nullable=False),
    sa.Column('port_id', sa.String(length=36), nullable=False),
    sa.Column('mac_address', sa.String(length=32), nullable=False),
    sa.Column('status', sa.String(length=255), nullable=False),
    sa.Column('device_id', sa.String(length=36), nullable=True),
    sa.Column('host_id', sa.String(length=36), nullable=True),
    sa.Column('vnic_type', sa.String(length=255), nullable=True),
    sa.Column('created_at', TIMESTAMP, nullable=True),
    sa.Column('updated_at', TIMESTAMP, nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_events'))
    )
    op.create_table('runbooks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('description', sa.String(length=255), nullable=True),
    sa.Column('public', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('owner', sa.String(length=255), nullable=True),
    sa.Column('disable_ramdisk', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('extra', sa.Text(), nullable=True),
    sa.Column('created_at', TIMESTAMP, nullable=True),
    sa.Column('updated_at', TIMESTAMP, nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runbooks')),
    sa.UniqueConstraint('name', name=op.f('uq_runbooks_name')),
    sa.UniqueConstraint('uuid', name=op.f('uq_runbooks_uuid'))
    )
    op.create_table('deploy_template_steps',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('deploy_template_id', sa.Integer(), nullable=False),
    sa.Column('interface', sa.String(length=255), nullable=False),
    sa.Column('step', sa.String(length=255), nullable=False),
    sa.Column('args', sa.Text(), nullable=True),
    sa.Column('priority', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), server_default='0', nullable=False),
    sa.Column('created_at', TIMESTAMP, nullable=True),
    sa.Column('updated_at', TIMESTAMP, nullable=True),
    sa.ForeignKeyConstraint(['deploy_template_id'], ['deploy_templates.id'], name=op.f('fk_deploy_template_steps_deploy_template_id_deploy_templates'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_deploy_template_steps'))
    )
    with op.batch_alter_table('deploy_template_steps', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_deploy_template_steps_deploy_template_id'), ['deploy_template_id'], unique=False)

    op.create_table('firmware_information',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('node_id', sa.Integer(), nullable=False),
    sa.Column('component', sa.String(length=255), nullable=False),
    sa.Column('initial_version', sa.String(length=255), nullable=False),
    sa.Column('current_version', sa.String(length=255), nullable=True),
    sa.Column('last_version_flashed', sa.String(length=255), nullable=True),
    sa.Column('vendor', sa.String(length=255), nullable=True),
    sa.Column('model', sa.String(length=255), nullable=True),
    sa.Column('serial_number', sa.String(length=255), nullable=True),
    sa.Column('created_at', TIMESTAMP, nullable=True),
    sa.Column('updated_at', TIMESTAMP, nullable=True),
    sa.ForeignKeyConstraint(['node_id'], ['nodes.id'], name=op.f('fk_firmware_information_node_id_nodes'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_firmware_information')),
    sa.UniqueConstraint('node_id', 'component', name=op.f('uq_firmware_information_node_id_component'))
    )
    op.create_table('node_history',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('node_id', sa.Integer(), nullable=False),
    sa.Column('conductor', sa.String(length=255), nullable=True),
    sa.Column('event_type', sa.String(length=255), nullable=True),
    sa.Column('severity', sa.String(length=255), nullable=True),
    sa.Column('event', sa.Text(), nullable=True),
    sa.Column('user', sa.String(length=64), nullable=True),
    sa.Column('project', sa.String(length=80), nullable=True),
    sa.Column('state', sa.String(length=255), nullable=True),
    sa.Column('target_provision_state', sa.String(length=255), nullable=True),
    sa.Column('duration_seconds', sa.Integer(), nullable=True),
    sa.Column('created_at', TIMESTAMP, nullable=True),
    sa.Column('updated_at', TIMESTAMP, nullable=True),
    sa.ForeignKeyConstraint(['node_id'], ['nodes.id'], name=op.f('fk_node_history_node_id_nodes'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_node_history')),
    sa.UniqueConstraint('uuid', name=op.f('uq_node_history_uuid'))
    )
    with op.batch_alter_table('node_history', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_node_history_node_id_id'), ['node_id', 'id'], unique=False)

    op.create_table('node_inventory',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('node_id', sa.Integer(), nullable=False),
    sa.Column('inventory_data', sa.Text(), nullable=True),
    sa.Column('plugin_data', sa.Text(), nullable=True),
    sa.Column('created_at', TIMESTAMP, nullable=True),
    sa.Column('updated_at', TIMESTAMP, nullable=True),
    sa.ForeignKeyConstraint(['node_id'], ['nodes.id'], name=op.f('fk_node_inventory_node_id_nodes'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_node_inventory')),
    sa.UniqueConstraint('node_id', name=op.f('uq_node_inventory_node_id'))
    )
    op.create_table('runbook_steps',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('runbook_id', sa.Integer(), nullable=False),
    sa.Column('interface', sa.String(length=255), nullable=False),
    sa.Column('step', sa.String(length=255), nullable=False),
    sa.Column('args', sa.Text(), nullable=True),
    sa.Column('order', sa.Integer(), nullable=False),
    sa.Column('created_at', TIMESTAMP, nullable=True),
    sa.Column('updated_at', TIMESTAMP, nullable=True),
    sa.ForeignKeyConstraint(['runbook_id'], ['runbooks.id'], name=op.f('fk_runbook_steps_runbook_id_runbooks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runbook_steps'))
    )
    with op.batch_alter_table('runbook_steps', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_runbook_steps_runbook_id'), ['runbook_id'], unique=False)

    op.create_table('runbook_traits',
    sa.Column('runbook_id', sa.Integer(), nullable=False),
    sa.Column('trait', sa.String(length=255), nullable=False),
    sa.Column('created_at', TIMESTAMP, nullable=True),
    sa.Column('updated_at', TIMESTAMP, nullable=True),
    sa.ForeignKeyConstraint(['runbook_id'], ['runbooks.id'], name=op.f('fk_runbook_traits_runbook_id_runbooks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('runbook_id', 'trait', name=op.f('pk_runbook_traits'))
    )
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('network_data', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('boot_mode', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('secure_boot', sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column('shard', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('parent_node', sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column('service_step', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('disable_power_off', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column('instance_name', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('health', sa.String(length=32), nullable=True))
        batch_op.create_index(batch_op.f('ix_nodes_parent_node'), ['parent_node'], unique=False)
        batch_op.create_index(batch_op.f('ix_nodes_shard'), ['shard'], unique=False)

