from alembic import context

from corral.core.migrations import run_env

run_env(context)
