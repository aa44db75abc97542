"""key names: who queued a job and from where, who registered a version, an audit of alias moves and deletes

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-08 09:00:00.000000

``jobs.submitter`` held a fingerprint of ``LABELSERVE_API_KEY`` (0.2.x had that one key); it now
holds the name of the key a job came with, and that key is named ``default``, so the 0.2.x
fingerprints become ``default``. Versions and alias and delete events registered before know no
key: their ``created_by`` stays null.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("target", sa.String(512), nullable=False),
        sa.Column("key_name", sa.String(64), nullable=True),
        sa.Column("address", sa.String(64), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("submitted_from", sa.String(64), nullable=True))
    op.execute("UPDATE jobs SET submitter = 'default' WHERE submitter IS NOT NULL")  # 0.2.x rows
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("created_by", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.drop_column("created_by")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("submitted_from")
    op.drop_table("audit_events")
