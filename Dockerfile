# One image for both services and the CLI (see docker-compose.yml).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY gen gen
COPY agentctx_common agentctx_common
COPY agentctx_cli agentctx_cli
COPY context_service context_service
COPY cache_service cache_service
RUN pip install --no-cache-dir -c constraints.txt . \
    && useradd --uid 10001 --create-home agentctx
USER 10001
ENTRYPOINT []
