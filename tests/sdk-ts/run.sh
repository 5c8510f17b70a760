#!/bin/sh
# run.sh SRCDIR SDKDIR WORKDIR: the TypeScript SDK's tests as one meson test.
#
# It installs the locked test dependencies (Mastra, Zod 3 and 4, Valibot,
# ArkType, the MCP SDK, TypeScript) into WORKDIR with `npm ci`, only when the
# lock file changed since the last install; links the SDK in as
# node_modules/@berth/sdk, as `npm install ./sdk/typescript` does; copies
# the SDK's sources (a test builds them and compares with the shipped
# dist/) and examples/mastra/tools.ts (tests run it with tsx); and runs `node --test` on the test files. The source tree
# is never written to. Exit 77 (meson's "skipped") only when node is
# missing; everything else that goes wrong is a failure.
set -eu
src=$1
sdk=$2
work=$3

if ! command -v node >/dev/null 2>&1; then
	echo "sdk-ts: node is not installed: skipping the SDK tests (Debian: apt-get install nodejs npm)"
	exit 77
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "sdk-ts: node is installed but npm is not (Debian: apt-get install npm)" >&2
	exit 1
fi

mkdir -p "$work"
cp "$src/package.json" "$src/package-lock.json" "$src"/*.mjs \
	"$src/../harness/child.mjs" "$work/"
if ! cmp -s "$src/package-lock.json" "$work/.installed-lock.json" ||
   [ ! -d "$work/node_modules/@mastra/core" ]; then
	echo "sdk-ts: npm ci in $work"
	# npm ci empties node_modules, the SDK's link included.
	(cd "$work" && npm ci --no-audit --no-fund --loglevel=error) >&2
	cp "$src/package-lock.json" "$work/.installed-lock.json"
fi
mkdir -p "$work/node_modules/@berth"
rm -rf "$work/node_modules/@berth/sdk"
ln -s "$sdk" "$work/node_modules/@berth/sdk"
rm -rf "$work/sdk-src" "$work/example"
mkdir -p "$work/sdk-src" "$work/example"
cp -R "$sdk/src" "$sdk/tsconfig.json" "$sdk/package.json" "$work/sdk-src/"
# examples/mastra/tools.ts runs as it is, with this folder's packages.
cp "$sdk/../../examples/mastra/tools.ts" "$work/example/"

cd "$work"
export BERTH_SDK_DIR="$sdk"
# Each test and hook has its own bound (bounded.mjs); --test-timeout bounds
# a whole file (node 20), for a hang outside any test, such as a handle
# left open that keeps the file's process alive after its last test.
exec node --test --test-reporter=spec --test-concurrency=1 --test-timeout=600000 ${BERTH_SDK_TESTS:-*.test.mjs}
