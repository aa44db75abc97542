"""Alembic environment: the URL comes from the caller (``app.db.migrate``) or the settings."""

from alembic import context
from sqlalchemy import create_engine

from app.config import get_settings
from app.orm import Base

config = context.config
url = config.attributes.get("connection_url") or get_settings().resolved_database_url

connectable = create_engine(url)
with connectable.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=url.startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()
connectable.dispose()
