#!/usr/bin/env bash
# Makes the pinned Rust toolchain ready to build bench: the toolchain of
# rust-toolchain.toml, its rustfmt and clippy, and the wasm32-wasip2 target the
# first-party plugins are built for. Idempotent, and quick when everything is there.
#
# rust-toolchain.toml names the target, but rustup does not add a missing target to a
# toolchain that is already installed, and installs nothing at all when
# RUSTUP_AUTO_INSTALL=0 is set; without the target the plugin build fails with
# "can't find crate for `std`". scripts/demo.sh and .ci/run call this first.
set -euo pipefail
cd "$(dirname "$0")/.."

target=wasm32-wasip2
die() { echo "toolchain.sh: $*" >&2; exit 1; }

command -v rustup >/dev/null \
  || die "rustup not found: install Rust with rustup (https://rustup.rs); rust-toolchain.toml pins the version"

# The toolchain itself (rustup reads rust-toolchain.toml in this directory).
if ! rustup show active-toolchain >/dev/null 2>&1; then
  echo "toolchain.sh: installing the toolchain pinned in rust-toolchain.toml" >&2
  rustup toolchain install
fi
toolchain=$(rustup show active-toolchain | cut -d' ' -f1)

installed_components=$(rustup component list --installed --toolchain "$toolchain")
for component in rustfmt clippy; do
  if ! grep -q "^$component" <<<"$installed_components"; then
    echo "toolchain.sh: adding $component to $toolchain" >&2
    rustup component add --toolchain "$toolchain" "$component"
  fi
done

if ! rustup target list --installed --toolchain "$toolchain" | grep -qx "$target"; then
  echo "toolchain.sh: adding the $target target to $toolchain (the plugins are built for it)" >&2
  rustup target add --toolchain "$toolchain" "$target"
fi
