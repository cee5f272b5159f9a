# syntax=docker/dockerfile:1
# context-curator: the proxy installed in a venv on python:3.11-slim, run as a non-root user.
#   docker build -t context-curator .
#   docker run --read-only --tmpfs /tmp -p 127.0.0.1:8080:8080 \
#     -e OPENAI_API_KEY -e CURATOR_PROXY_KEY -v curator-data:/data \
#     -v "$PWD/deploy/config.docker.yaml:/etc/curator/config.yaml:ro" \
#     -v "$PWD/deploy/policies:/etc/curator/policies:ro" context-curator
# config.docker.yaml requires CURATOR_PROXY_KEY (the key clients send; docs/deployment.md).
# The root filesystem can be mounted read-only: the proxy writes only under /data (mount a volume
# there for a SQLite audit log) and /tmp (mount a tmpfs).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Only what the wheel is built from, so edits to tests, docs or deploy/ reuse this layer.
COPY pyproject.toml README.md ./
COPY policies/ policies/
COPY proxy/ proxy/
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/curator \
 && /opt/curator/bin/pip install "$(ls /wheels/*.whl)[fast,postgres,otel]"
# [postgres]: psycopg with its own libpq, for `audit: {dsn: ...}`; nothing to apt-get.
# tiktoken downloads its BPE files on first use. rs_bpe (the [fast] extra) has both vocabularies
# compiled in, so policies.bpe_files rebuilds the official files from it, with no download; then
# tiktoken loads them (checking their SHA-256). The image runs air-gapped: the runtime stage
# points TIKTOKEN_CACHE_DIR at the same folder.
ENV TIKTOKEN_CACHE_DIR=/opt/curator/tiktoken
RUN /opt/curator/bin/python -m policies.bpe_files "$TIKTOKEN_CACHE_DIR" \
 && /opt/curator/bin/python -c "import tiktoken; [tiktoken.get_encoding(n).encode('ok') for n in ('cl100k_base', 'o200k_base')]" \
 && test "$(ls "$TIKTOKEN_CACHE_DIR" | wc -l)" -ge 2

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="context-curator" \
      org.opencontainers.image.description="Transparent OpenAI-compatible proxy that keeps agents' context lean" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric uid lets Kubernetes verify runAsNonRoot and lets runAsUser name the same user.
RUN groupadd --system --gid 10001 curator \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin curator \
 && install -d -o 10001 -g 10001 -m 0750 /data \
 && install -d -m 0755 /etc/curator
COPY --from=build /opt/curator /opt/curator
# pip compiled the bytecode at build time; nothing needs to write .pyc files at run time.
# HOME=/tmp sends any library's cache writes to the tmpfs instead of the read-only root.
ENV PATH=/opt/curator/bin:$PATH \
    TIKTOKEN_CACHE_DIR=/opt/curator/tiktoken \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
WORKDIR /data
USER 10001:10001
EXPOSE 8080
# slim images have no curl; urlopen raises on a refused connection or a non-2xx status.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["curator"]
CMD ["serve", "--config", "/etc/curator/config.yaml", "--host", "0.0.0.0", "--port", "8080"]
