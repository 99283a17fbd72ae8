# The Felix container image: the static felix binary on scratch, running as
# the non-root user felix (65532) with all state in the /data volume.
#
# Nothing is pulled: the binary is built outside, then copied in. Either
#
#   CGO_ENABLED=0 go build -o felix . && docker build -t felix .
#
# or goreleaser's docker step (goreleaser.yaml), which builds the same file in
# a context holding its own linux binary. See docs/install.md.
FROM scratch

# A passwd and group naming the felix user, and /data owned by it so that a
# named or anonymous volume created from the image is writable by felix.
COPY deploy/container/rootfs/etc/ /etc/
COPY --chown=65532:65532 deploy/container/rootfs/data/ /data/
COPY felix /usr/local/bin/felix

USER 65532:65532
WORKDIR /data

# Listen on every interface of the container; publish the ports you need.
# The development certificate always covers localhost and 127.0.0.1; name
# any other host clients use in FELIX_TLS_HOSTS (comma-separated).
ENV FELIX_DATA_DIR=/data \
    FELIX_QUIC_BIND=0.0.0.0:5000 \
    FELIX_CONTROLPLANE_ADDR=0.0.0.0:5080 \
    FELIX_BROKER_METRICS_BIND=0.0.0.0:8080

VOLUME ["/data"]

# 5000/udp: the broker (QUIC). 5080/tcp: the control plane's REST API (plain
# HTTP unless FELIX_CONTROLPLANE_TLS_CERT/_KEY are set: publish it only where
# you trust the network). 8080/tcp: /metrics, /live and /ready. scratch holds
# no HTTP client for a HEALTHCHECK: probe /live and /ready from outside.
EXPOSE 5000/udp 5000/tcp 5080/tcp 8080/tcp

# SIGTERM drains gracefully (docs/operations.md); give `docker stop` longer
# than --shutdown-timeout (10s), e.g. `docker stop -t 15`.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/felix"]
CMD ["serve"]
