#!/bin/sh
# run.sh SRCDIR WORKDIR: the MCP tests (mcp.test.mjs, ext-tasks.test.mjs)
# as one meson test.
#
# It installs the locked SDKs into WORKDIR with `npm ci` (only when the
# lock file changed since the last install), copies the test files beside
# them so that Node resolves the SDKs from there, and runs `node --test`.
# The source tree is never written to. Exit 77 (meson's "skipped") only
# when node is missing; everything else that goes wrong is a failure.
# The 2.x client that ext-tasks.test.mjs drives needs Node 20; an older
# node (Debian 12 ships 18) runs the 1.x tests alone, and says so.
set -eu
src=$1
work=$2

if ! command -v node >/dev/null 2>&1; then
	echo "mcp: node is not installed: skipping the MCP tests (Debian: apt-get install nodejs npm)"
	exit 77
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "mcp: node is installed but npm is not (Debian: apt-get install npm)" >&2
	exit 1
fi

mkdir -p "$work"
cp "$src/package.json" "$src/package-lock.json" "$src"/*.mjs \
	"$src/../harness/child.mjs" "$work/"
if ! cmp -s "$src/package-lock.json" "$work/.installed-lock.json" ||
   [ ! -d "$work/node_modules/@modelcontextprotocol/sdk" ]; then
	echo "mcp: npm ci in $work"
	(cd "$work" && npm ci --no-audit --no-fund --loglevel=error) >&2
	cp "$src/package-lock.json" "$work/.installed-lock.json"
fi

files="mcp.test.mjs principals.test.mjs"
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -ge 20 ]; then
	files="$files ext-tasks.test.mjs"
else
	echo "mcp: node $major is older than 20, which @modelcontextprotocol/client needs: not running ext-tasks.test.mjs"
fi

cd "$work"
# shellcheck disable=SC2086 # files is a list of names without spaces
exec node --test --test-reporter=spec $files
