# Sourced by scripts/real-server.sh, scripts/vllm-checks.sh and scripts/vs-vllm.sh: the bench
# binary they drive, and the server and client processes they start, which must not outlive
# them however they end (a failed check, Ctrl-C, a TERM from CI's timeout).
#
#   source scripts/lib/processes.sh
#   bench_binary                 # sets $bench: $BENCH_BIN, else a release build of bench
#   some-server & server_pid=$!  # stop_server kills and reaps it
#   a-client & client_pid=$!; wait "$client_pid"   # in the background, so that a signal
#                                # reaches the traps at once rather than after the run
#   tmp=$(mktemp -d)             # removed at exit (kept, and said so, when KEEP_TMP is set)
# It uses the caller's `die`.

bench_binary() {
  if [ -n "${BENCH_BIN:-}" ]; then
    bench=$BENCH_BIN
  else
    cargo build --release -p bench
    bench=$PWD/target/release/bench
  fi
  [ -x "$bench" ] || die "bench binary $bench not found"
}

server_pid="" client_pid="" tmp=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
processes_cleanup() {
  if [ -n "$client_pid" ]; then kill "$client_pid" 2>/dev/null || true; wait "$client_pid" 2>/dev/null || true; fi
  stop_server
  if [ -n "$tmp" ]; then
    if [ -n "${KEEP_TMP:-}" ]; then echo "files kept in $tmp" >&2; else rm -rf "$tmp"; fi
  fi
}
trap processes_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
