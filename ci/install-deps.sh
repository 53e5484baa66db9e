#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages commstack needs (apt-packages.txt, beside this script) where
# any is missing, saying which; idempotent. `bin/commstack run` and `test` call it on first use.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mapfile -t pkgs < <(grep -vE '^\s*(#|$)' "$here/apt-packages.txt")
missing=()
for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
((${#missing[@]})) || exit 0
if ! command -v apt-get >/dev/null; then
  echo "commstack: missing packages ${missing[*]}, and no apt-get here: install them with your package manager" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "commstack: installing ${missing[*]} needs root or sudo" >&2; exit 1; }
  sudo=sudo
fi
echo "commstack: installing Debian packages: ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "commstack: installed ${#missing[@]} packages" >&2
