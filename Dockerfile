# storage-affinity-webhook: the admission webhook server (gunicorn over TLS).
# Build: docker build -t storage-affinity-webhook:0.1.0 .
# Runs as the non-root user 65532 with a read-only root filesystem (the Helm chart mounts an emptyDir at /tmp).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY setup.cfg pyproject.toml README.md ./
COPY rules ./rules
COPY webhook ./webhook
COPY certs ./certs
RUN pip install --no-cache-dir . \
    && rm -rf /src \
    && groupadd --gid 65532 nonroot \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot

WORKDIR /tmp
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["storage-affinity-webhook"]
CMD ["serve"]
