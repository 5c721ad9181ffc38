#!/usr/bin/env bash
# Fails when src/gen differs from what `npm run generate` makes of crates/wire/proto now.
set -euo pipefail
cd "$(dirname "$0")/.."
fresh="$(mktemp -d)"
trap 'rm -rf "$fresh"' EXIT
npx buf generate ../crates/wire/proto --template buf.gen.yaml --output "$fresh"
if ! diff -r "$fresh/src/gen" src/gen >/dev/null; then
  diff -r "$fresh/src/gen" src/gen | head -40 >&2
  echo "typescript/src/gen is stale: run \`npm run generate\` in typescript/ and commit the result" >&2
  exit 1
fi
