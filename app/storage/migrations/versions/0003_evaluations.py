"""evaluations beside the immutable versions

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 08:00:00.000000

The metrics ``POST /evaluate`` used to write onto ``model_versions.metrics`` (one entry per
dataset id) move into rows of their own; the column goes, so a version row never changes after
it is registered.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# One evaluation row per (version, dataset id) entry of the old column, in plain SQL so that the
# offline mode (``alembic upgrade --sql``) renders it too. A version never evaluated holds SQL
# NULL or the JSON ``null``; both give no rows.
_COPY_METRICS = {
    "sqlite": """
        INSERT INTO evaluations (version_id, dataset_id, metrics, options, created_at)
        SELECT mv.id, e.key, e.value, '{}', mv.created_at
        FROM model_versions AS mv, json_each(mv.metrics) AS e
        WHERE json_type(mv.metrics) = 'object'
        ORDER BY mv.id
    """,
    "postgresql": """
        INSERT INTO evaluations (version_id, dataset_id, metrics, options, created_at)
        SELECT mv.id, e.key, e.value, CAST('{}' AS JSON), mv.created_at
        FROM model_versions AS mv
        CROSS JOIN LATERAL json_each(
            CASE WHEN json_typeof(mv.metrics) = 'object' THEN mv.metrics ELSE CAST('{}' AS JSON) END
        ) AS e
        ORDER BY mv.id
    """,
}
# Back to one object per version: the latest evaluation on each dataset.
_RESTORE_METRICS = {
    "sqlite": """
        UPDATE model_versions SET metrics = (
            SELECT json_group_object(latest.dataset_id, json(latest.metrics))
            FROM (
                SELECT ev.dataset_id, ev.metrics FROM evaluations AS ev
                WHERE ev.version_id = model_versions.id
                  AND ev.id = (SELECT max(e2.id) FROM evaluations AS e2
                               WHERE e2.version_id = ev.version_id AND e2.dataset_id = ev.dataset_id)
            ) AS latest
        )
        WHERE id IN (SELECT version_id FROM evaluations)
    """,
    "postgresql": """
        UPDATE model_versions SET metrics = (
            SELECT json_object_agg(latest.dataset_id, latest.metrics)
            FROM (
                SELECT DISTINCT ON (ev.dataset_id) ev.dataset_id, ev.metrics FROM evaluations AS ev
                WHERE ev.version_id = model_versions.id
                ORDER BY ev.dataset_id, ev.id DESC
            ) AS latest
        )
        WHERE id IN (SELECT version_id FROM evaluations)
    """,
}


def upgrade() -> None:
    op.create_table(
        "evaluations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.String(length=64), nullable=False),
        sa.Column("dataset_sha256", sa.String(length=64), nullable=True),
        sa.Column("n_samples", sa.Integer(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["version_id"], ["model_versions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_evaluations_version_id"), ["version_id"], unique=False)

    op.execute(_COPY_METRICS[op.get_context().dialect.name])
    # SQLite >= 3.35 drops a column in place; the table copy of batch mode would need reflection,
    # which the offline mode cannot do
    with op.batch_alter_table("model_versions", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("metrics")


def downgrade() -> None:
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("metrics", sa.JSON(), nullable=True))
    op.execute(_RESTORE_METRICS[op.get_context().dialect.name])
    op.drop_table("evaluations")
