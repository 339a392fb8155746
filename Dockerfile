# syntax=docker/dockerfile:1
# One image for both processes:
#   webhook (default):  ENTRYPOINT phalanx-webhook
#   controller:         command: [phalanx-controller]
#   cert bootstrap:     command: [python, -m, certs, bootstrap]
# Pin the base by digest in CI (python:3.11-slim@sha256:...) for reproducible builds.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Only what the wheel is built from; tests, deploy/ and docs stay out (see .dockerignore).
COPY pyproject.toml README.md requirements.lock ./
COPY shared/ shared/
COPY certs/ certs/
COPY webhook/ webhook/
COPY controller/ controller/
# The dependencies are exactly requirements.lock's pins, each checked against its hash (`make lock`
# regenerates it); the package itself then goes in without resolving anything again.
# Bytecode is compiled now because the root filesystem is read-only at runtime; pip and
# setuptools are dropped from the runtime environment.
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/phalanx \
 && /opt/phalanx/bin/pip install --require-hashes -r requirements.lock \
 && /opt/phalanx/bin/pip install --no-deps --no-index --find-links /wheels phalanx \
 && /opt/phalanx/bin/python -m compileall -q /opt/phalanx/lib \
 && /opt/phalanx/bin/pip uninstall -y pip setuptools

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="phalanx" \
      org.opencontainers.image.description="Gang scheduling for AI/ML jobs on the stock kube-scheduler" \
      org.opencontainers.image.source="https://github.com/phalanx-sched/phalanx" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/phalanx /opt/phalanx
ENV PATH=/opt/phalanx/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric, so runAsNonRoot can verify it without an /etc/passwd entry.
USER 65532:65532
WORKDIR /tmp
EXPOSE 9443 8080 8081
ENTRYPOINT ["phalanx-webhook"]
