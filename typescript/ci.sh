#!/usr/bin/env bash
# The TypeScript package's checks: node_modules made by `npm ci` from package-lock.json (remade
# only when the lock changes; npm's cache makes a remake cheap), the generated code checked
# against crates/wire/proto, `tsc --noEmit` (strict), then `node --test` against the daemon
# built by cargo ($AGENTSESSIONS_BIN_DIR, default target/debug).
set -euo pipefail
cd "$(dirname "$0")"
stamp=node_modules/.lock-sha256
want="$(sha256sum package-lock.json | cut -c1-64)"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  npm ci --no-audit --no-fund --prefer-offline
  echo "$want" > "$stamp"
fi
npm run --silent check-generated
npx tsc --noEmit -p tsconfig.json
rm -rf dist
npx tsc -p tsconfig.build.json --noCheck   # checked just above
node --test --test-concurrency=2 dist/test/*.test.js
