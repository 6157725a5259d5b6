# syntax=docker/dockerfile:1
# bench as a container image, for sharded runs on Kubernetes (docs/kubernetes.md):
#
#   docker build -t registry.example.com/bench:0.1.0 .
#   docker push registry.example.com/bench:0.1.0
#
# The builder compiles bench with its first-party plugins (built for wasm32-wasip2 and
# embedded by crates/runtime/build.rs); the runtime image holds the binary, CA
# certificates and an unprivileged user. Everything is fetched while building: a run
# fetches nothing (tokenizers, datasets and third-party plugins come from mounted
# volumes, see `bench k8s render --file/--data-pvc`). The native engine's CUDA build
# (`--features cuda`) is not made here.

# The Rust of rust-toolchain.toml, on the Debian release of the runtime image below (one
# glibc for both).
FROM rust:1.95.0-slim-trixie AS builder
# A C++ compiler for the tokenizers crate's esaxx (the slim image has C only).
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The pinned toolchain's wasm32-wasip2 target (and rustfmt/clippy, which it checks too),
# then the release build; the caches keep crates and objects between builds, so the
# binary is copied out of them.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    bash scripts/toolchain.sh \
    && cargo build --release --locked -p bench \
    && install -m 0755 target/release/bench /usr/local/bin/bench

FROM debian:trixie-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
# A numeric user, so that Kubernetes' runAsNonRoot can tell it is not root; the rendered
# pods write results through the volume's group (fsGroup), not as this user's.
RUN useradd --uid 10001 --user-group --create-home --home-dir /home/bench bench
COPY --from=builder /usr/local/bin/bench /usr/local/bin/bench
USER 10001:10001
WORKDIR /home/bench
# The compiled-plugin cache ($HOME/.cache/bench) is written in the container's own layer.
ENV HOME=/home/bench
ENTRYPOINT ["bench"]
