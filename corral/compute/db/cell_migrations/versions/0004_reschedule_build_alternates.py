"""instances.build_alternates (the alternates of a build, for rescheduling)

Revision ID: 0004_reschedule
Revises: 0003
Create Date: 2026-11-28
"""

from alembic import op
import sqlalchemy as sa

revision = '0004_reschedule'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.add_column(sa.Column('build_alternates', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.drop_column('build_alternates')
