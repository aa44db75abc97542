"""the highest version number each model name has had

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 09:00:00.000000

Version numbers were computed as ``max(version) + 1`` over the rows that still exist, so deleting
the newest version, or the whole model, handed its number out again and ``name@2`` could
silently become another model. The counter row outlives its versions and its model; it starts
at the highest version each name has now.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "version_counters",
        sa.Column("model_name", sa.String(255), primary_key=True),
        sa.Column("last_version", sa.Integer(), nullable=False),
    )
    op.execute(
        "INSERT INTO version_counters (model_name, last_version) "
        "SELECT model_name, MAX(version) FROM model_versions GROUP BY model_name"
    )


def downgrade() -> None:
    op.drop_table("version_counters")
