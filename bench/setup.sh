#!/usr/bin/env bash
# Installs the optional fast tools the benchmark prefers: nginx (static upstream) and wrk
# (load generator). Without them bench/run.py falls back to its built-in Python versions.
# Debian/Ubuntu only; needs root (or sudo).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

$SUDO apt-get update
# The package's own service is not wanted: the benchmark runs nginx in the foreground with
# its own config on a loopback port. policy-rc.d stops the postinst from starting it on :80.
POLICY=/usr/sbin/policy-rc.d
CREATED_POLICY=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod +x "$POLICY"
    CREATED_POLICY=1
fi
cleanup() {
    if [ "$CREATED_POLICY" -eq 1 ]; then
        $SUDO rm -f "$POLICY"
    fi
}
trap cleanup EXIT

DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends nginx wrk

command -v nginx >/dev/null && echo "nginx: $(nginx -v 2>&1)"
command -v wrk >/dev/null && echo "wrk: $(wrk --version 2>&1 | head -n 1)"
