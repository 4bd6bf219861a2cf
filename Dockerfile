# One image for the three deployables (koordpy extender, koordpy manager, koordpy agent run) and the
# offline tools: `make image` builds and tags it as the chart's default image (see README.md, Install).
#
# The build stage installs the locked runtime dependencies (requirements/run.lock, the lock `make demo`
# and `make test` install from; hashes checked) into /opt/koordpy, builds koordpy's wheel with the lock's
# setuptools and installs it there; the final stage copies only that virtualenv. scripts/image-install.sh
# holds the steps, and tests/cluster/test_cluster_image_install.py runs this file's RUN lines against a
# temporary directory.
FROM python:3.11.12-slim-bookworm AS base

FROM base AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY scripts/image-install.sh /usr/local/bin/image-install.sh
COPY pyproject.toml README.md requirements/run.lock ./
COPY src ./src
RUN image-install.sh venv /src/run.lock /opt/koordpy \
    && image-install.sh wheel /src /dist /opt/koordpy \
    && image-install.sh install /dist /opt/koordpy

FROM base
LABEL org.opencontainers.image.source="https://github.com/koordpy/koordpy" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/koordpy /opt/koordpy
# Nothing is written to the image at run time (readOnlyRootFilesystem): byte code was compiled at install
# time and the services write no files. HOME is /tmp, so ~/.kube/config is /tmp/.kube/config; in a pod
# the services use the service account. A --kubeconfig with inline certificates makes the kubernetes
# loader write them to a temporary file: mount a writable /tmp for that.
ENV PATH=/opt/koordpy/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
USER 65532:65532
ENTRYPOINT ["koordpy"]
CMD ["--help"]
