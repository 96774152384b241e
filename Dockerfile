# One Dockerfile, one image per service (see docker-compose.yml): each
# target installs only its own service's dependencies.
#   docker build --target context -t agentctx-context .
#   docker build --target cache -t agentctx-cache .
FROM python:3.11-slim AS source
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY gen gen
# agentctx-client ships the generated stubs: clients/python/agentctx links to gen/agentctx.
COPY clients/python clients/python
COPY agentctx_common agentctx_common
COPY agentctx_cli agentctx_cli
COPY context_service context_service
COPY cache_service cache_service
RUN useradd --uid 10001 --create-home agentctx

# The context service (and the CLI's db, certs and inspect commands): no provider SDKs;
# the S3 client for artifact bytes in an object store (artifact_store_url).
FROM source AS context
RUN pip install --no-cache-dir -c constraints.txt ./clients/python '.[context,s3]'
USER 10001
ENTRYPOINT []

# The cache service: no SQLAlchemy, asyncpg, aiosqlite or Alembic.
FROM source AS cache
RUN pip install --no-cache-dir -c constraints.txt ./clients/python '.[cache]'
USER 10001
ENTRYPOINT []
