"""version artifact format: the store's artifact format a version was written in (1: by 0.1.x)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07 12:00:00.000000

Every version registered before this revision was written by 0.1.x: format 1, which stays the
column's default (a row inserted by code that does not know the column is one of 0.1.x); the
registry writes ``app.storage.store.ARTIFACT_FORMAT`` on every new version. The column is added
in place (SQLite too: no table copy, which the offline mode could not render).
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("artifact_format", sa.Integer(), nullable=False, server_default="1"))


def downgrade() -> None:
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.drop_column("artifact_format")
