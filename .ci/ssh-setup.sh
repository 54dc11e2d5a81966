#!/usr/bin/env bash
# Installs the OpenSSH server and client the remote tests drive (tests/e2e/test_remote*.py):
# each test starts its own sshd on 127.0.0.1 with a throwaway key, by the absolute path
# /usr/sbin/sshd. The system's sshd service is neither enabled nor started: a policy-rc.d
# refuses every service start while the packages are installed, and is removed after.
# Idempotent and non-interactive; root, Debian.
#
#   bash .ci/ssh-setup.sh
set -euo pipefail

if [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null && command -v ssh-keygen >/dev/null; then
  # sshd's privilege separation folder, gone after a reboot (/run is a tmpfs)
  if [ "$(id -u)" = 0 ]; then mkdir -p /run/sshd; fi
  echo "ssh-setup: $(ssh -V 2>&1) and /usr/sbin/sshd already installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "ssh-setup: run as root (it installs openssh-server and openssh-client)" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "ssh-setup: apt-get is needed (Debian or Ubuntu)" >&2
  exit 1
fi

# No service may start while the packages are installed: the tests start their own sshd.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  made_policy=1
fi
cleanup() { if [ "$made_policy" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show openssh-server >/dev/null 2>&1; then
  apt-get update -q
fi
apt-get install -y -q --no-install-recommends openssh-server openssh-client
# Installing may have enabled the unit for the next boot (systemd machines): undo that.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl disable --now ssh.service >/dev/null 2>&1 || true
fi
mkdir -p /run/sshd  # sshd's privilege separation folder; it will not start without it
echo "ssh-setup: $(ssh -V 2>&1) and /usr/sbin/sshd installed (the service not started)"
