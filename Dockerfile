# labelserve API (and, with `labelserve worker`, a job worker; with `labelserve migrate`, the
# one-shot schema migration that docker-compose.yml runs before both).
#
# On its own (`docker run`), the image serves the embedded set-up: SQLite and the model store in
# the /data/models volume; the API migrates that SQLite file itself at start-up
# (LABELSERVE_AUTO_MIGRATE defaults to true on SQLite only). With a server database
# (LABELSERVE_DATABASE_URL=postgresql+psycopg://...), run `labelserve migrate` once per release
# before starting the API and the workers: the API then only checks that the schema is current
# and refuses to start otherwise.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    LABELSERVE_MODEL_DIR=/data/models \
    LABELSERVE_GRPC_PORT=8001

RUN useradd --create-home --uid 10001 labelserve \
    && mkdir -p /data/models && chown labelserve /data/models

WORKDIR /app
# The exact, hash-checked versions of requirements.lock (regenerate it with the command at its top
# when pyproject.toml's dependencies change; .ci/run fails while it is stale), then the project
# itself with nothing resolved again: the same image from the same commit.
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip install --no-deps . && pip check

USER labelserve
VOLUME ["/data/models"]
# 8000: HTTP; 8001: the V2 inference protocol over gRPC (LABELSERVE_GRPC_PORT, on --host's address too)
EXPOSE 8000 8001
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4).status == 200 else 1)"
CMD ["labelserve", "serve", "--host", "0.0.0.0", "--port", "8000"]
