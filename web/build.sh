#!/usr/bin/env bash
# Bundles the playground (web/src) into web/dist with Debian's esbuild.
# web/dist is committed: the daemon embeds it, so `make` needs neither npm
# nor the network. Run `make web` after changing web/src (it runs npm ci
# first when web/node_modules is missing or stale).
set -euo pipefail
cd "$(dirname "$0")"
rm -rf dist.new && mkdir -p dist.new
esbuild src/main.js --bundle --minify --format=iife --target=es2020 --legal-comments=none \
  --outfile=dist.new/app.js --log-level=warning
cat node_modules/@xterm/xterm/css/xterm.css src/style.css src/panels.css > dist.new/app.css.tmp
esbuild dist.new/app.css.tmp --loader:.tmp=css --minify --outfile=dist.new/app.css --log-level=warning
rm dist.new/app.css.tmp
cp src/index.html dist.new/index.html
rm -rf dist && mv dist.new dist
ls -l dist
