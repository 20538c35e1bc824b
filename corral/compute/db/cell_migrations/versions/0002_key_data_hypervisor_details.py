"""instances.key_data; compute_nodes.hypervisor_version, host_ip, cpu_info

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


def upgrade() -> None:
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.add_column(sa.Column('key_data', sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mariadb').with_variant(mysql.MEDIUMTEXT(), 'mysql'), nullable=True))
    with op.batch_alter_table('compute_nodes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('hypervisor_version', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('host_ip', sa.String(length=39), nullable=True))
        batch_op.add_column(sa.Column('cpu_info', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('compute_nodes', schema=None) as batch_op:
        batch_op.drop_column('cpu_info')
        batch_op.drop_column('host_ip')
        batch_op.drop_column('hypervisor_version')
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.drop_column('key_data')
