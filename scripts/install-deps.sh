#!/usr/bin/env bash
# Installs the Debian 12 packages sandboxd needs to build, run, test and
# benchmark. Idempotent: checks first, installs only what is missing, says what.
set -euo pipefail

PACKAGES=(
  gcc make pkg-config
  libmicrohttpd-dev libjansson-dev libseccomp-dev libsqlite3-dev libssl-dev libwslay-dev
  python3 python3-pytest perl ruby nodejs esbuild
  bubblewrap hyperfine sqlite3 clang libclang-rt-14-dev
  uidmap
  libarchive-dev s3fs fuse3 python3-websocket chromium python3-cryptography
  libargon2-dev libcurl4-openssl-dev
  python3-matplotlib python3-pandas python3-numpy
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "sandboxd: missing Debian packages: ${missing[*]}" >&2
  echo "sandboxd: run as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi

echo "sandboxd: installing missing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
