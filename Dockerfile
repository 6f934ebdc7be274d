# syntax=docker/dockerfile:1
#
# Toolwarden's container image (docs/deploy.md, The container image).
#
#   docker build -t toolwarden --build-arg VERSION=$(git describe --tags --always) .
#   docker build -t toolwarden:slim --target slim .      # external PostgreSQL only
#
# The default image (the last stage) carries the PostgreSQL server binaries, so one
# container runs a single instance with the embedded database in its volume; give it
# DATABASE_URL and the same image uses an external PostgreSQL instead. The "slim"
# target is the binary alone, for an external PostgreSQL. cmd/toolwarden's
# TestDockerfile keeps this file in step with go.mod and the source tree.

# --- build: the static binary. Migrations (migrations/*.sql) and the static assets
# (static/) are embedded with go:embed, and the templ output (*_templ.go) and the
# front-end libraries (static/vendor/) are committed, so neither templ nor Node is
# needed here.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
# The module go.mod replaces with a patched copy (third_party/go-sdk/TOOLWARDEN.md).
COPY third_party/ third_party/
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/toolwarden ./cmd/toolwarden
# An empty data dir for the slim image, which has no shell to make one.
RUN install -d -m 0700 /out/data

# --- slim: the binary on distroless (CA certificates, time zones, a nonroot user),
# for an external PostgreSQL: set DATABASE_URL (and TOOLWARDEN_MIGRATE_DATABASE_URL).
# No shell and no init: run it with `docker run --init` so orphans of stdio servers
# are reaped.
FROM gcr.io/distroless/static-debian12:nonroot AS slim
COPY --from=build /out/toolwarden /usr/local/bin/toolwarden
COPY --from=build --chown=65532:65532 /out/data /data
ENV TOOLWARDEN_ADDR=0.0.0.0:8080 \
    TOOLWARDEN_DATA_DIR=/data
USER nonroot:nonroot
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/toolwarden"]
CMD ["serve"]

# --- runtime (default): Debian slim with the PostgreSQL server binaries for the
# embedded cluster (Toolwarden finds them under /usr/lib/postgresql/*/bin), CA
# certificates for HTTPS servers, and tini as PID 1 (it reaps what stdio servers leave
# behind and passes SIGTERM on). Debian's own cluster is not created: Toolwarden makes
# its own under <data-dir>/pg. It runs as the unprivileged user toolwarden (uid 10001),
# which PostgreSQL needs anyway (initdb and postgres refuse root).
FROM debian:bookworm-slim AS runtime
RUN set -eux; \
    mkdir -p /etc/postgresql-common; \
    echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.conf; \
    apt-get update; \
    apt-get install -y --no-install-recommends ca-certificates tini postgresql-15; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --system --gid 10001 toolwarden; \
    useradd --no-log-init --uid 10001 --gid toolwarden --home-dir /home/toolwarden --create-home --shell /usr/sbin/nologin toolwarden; \
    install -d -o toolwarden -g toolwarden -m 0700 /data
COPY --from=build /out/toolwarden /usr/local/bin/toolwarden
ENV TOOLWARDEN_ADDR=0.0.0.0:8080 \
    TOOLWARDEN_DATA_DIR=/data
USER toolwarden:toolwarden
WORKDIR /home/toolwarden
# The cluster template: a first start copies this migrated cluster into the volume
# instead of running initdb and the migrations (docs/architecture.md, Performance (Start-up)).
ENV TOOLWARDEN_PG_TEMPLATE=/home/toolwarden/pg-template
RUN ["/usr/local/bin/toolwarden", "pg-template"]
VOLUME /data
EXPOSE 8080
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/toolwarden"]
CMD ["serve"]
