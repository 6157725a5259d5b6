#!/usr/bin/env bash
# Proves that scripts/toolchain.sh makes a toolchain WITHOUT the wasm32-wasip2 target
# ready to build the plugins, as on a fresh machine with RUSTUP_AUTO_INSTALL=0 (where
# rust-toolchain.toml alone installs nothing). Run by .ci/run.
#
# It works on a throwaway copy of the rustup home (hard links, so it costs no disk
# space; the few metadata files rustup rewrites are real copies, so the machine's own
# toolchain is never touched), removes the target there, checks it is gone, runs
# scripts/toolchain.sh, and builds a first-party plugin for wasm32-wasip2 with it.
set -euo pipefail
cd "$(dirname "$0")/.."

target=wasm32-wasip2
die() { echo "check-fresh-toolchain.sh: $*" >&2; exit 1; }

real_home=${RUSTUP_HOME:-$HOME/.rustup}
toolchain=$(rustup show active-toolchain | cut -d' ' -f1)
source_dir=$(readlink -f "$real_home/toolchains/$toolchain")
[ -d "$source_dir" ] || die "toolchain $toolchain not found under $real_home"

mkdir -p target
work=$(mktemp -d "${PWD}/target/fresh-toolchain.XXXXXX")
trap 'rm -rf "$work"' EXIT
home=$work/rustup
mkdir -p "$home/toolchains"
cp "$real_home/settings.toml" "$home/"
copy=$home/toolchains/$toolchain
cp -al "$source_dir" "$copy"
# rustup rewrites its metadata files (lib/rustlib/*): give the copy its own.
for f in "$copy"/lib/rustlib/*; do
  [ -f "$f" ] && cp "$f" "$f.tmp" && mv "$f.tmp" "$f"
done

export RUSTUP_HOME=$home RUSTUP_AUTO_INSTALL=0
if rustup target list --installed --toolchain "$toolchain" | grep -qx "$target"; then
  rustup target remove --toolchain "$toolchain" "$target" >/dev/null 2>&1
fi
if rustup target list --installed --toolchain "$toolchain" | grep -qx "$target"; then
  die "could not make a toolchain without $target"
fi
echo "fresh toolchain: $toolchain without $target (RUSTUP_AUTO_INSTALL=0)"

bash scripts/toolchain.sh
rustup target list --installed --toolchain "$toolchain" | grep -qx "$target" \
  || die "scripts/toolchain.sh did not install $target"

# The nested plugin build crates/runtime/build.rs runs, for one plugin: the target's std is usable.
cargo build --quiet --release --target "$target" --manifest-path plugins/Cargo.toml \
  -p random --target-dir "$work/build"
[ -s "$work/build/$target/release/random.wasm" ] || die "no random.wasm was built"
echo "fresh toolchain: scripts/toolchain.sh added $target and a plugin built with it"
