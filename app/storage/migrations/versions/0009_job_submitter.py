"""job submitter: a fingerprint of the API key a job was queued under (the queued-jobs bound counts by it)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 17:40:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("submitter", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("submitter")
