"""dataset lineage: the parent and the split of a dataset made by POST /datasets/{id}/split

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 07:40:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parent_id", sa.String(64), nullable=True))
        batch_op.add_column(sa.Column("split", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_column("split")
        batch_op.drop_column("parent_id")
