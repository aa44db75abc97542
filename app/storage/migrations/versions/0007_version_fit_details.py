"""version fit details: what the fit measured (e.g. an approximate neighbour index's recall)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 07:30:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("fit_details", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.drop_column("fit_details")
