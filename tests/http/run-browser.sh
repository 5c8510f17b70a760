#!/bin/sh
# run-browser.sh SRCDIR WORKDIR SHOTDIR: the page's tests (browser.test.mjs)
# in real headless Chromium, as one meson test.
#
# It installs the locked playwright-core into WORKDIR with `npm ci` (only
# when the lock file changed since the last install), copies the test
# beside it, and runs `node --test`. Chromium is Debian's (apt-get install
# chromium; $CHROMIUM overrides the path); playwright never downloads a
# browser. Exit 77 (meson's "skipped") only when node or chromium is
# missing; everything else that goes wrong is a failure.
set -eu
src=$1
work=$2
shots=$3

if ! command -v node >/dev/null 2>&1; then
	echo "http-browser: node is not installed: skipping (Debian: apt-get install nodejs npm)"
	exit 77
fi
chromium=${CHROMIUM:-}
if [ -z "$chromium" ]; then
	chromium=$(command -v chromium || command -v chromium-browser || true)
fi
if [ -z "$chromium" ] || [ ! -x "$chromium" ]; then
	echo "http-browser: chromium is not installed: skipping (Debian: apt-get install chromium)"
	exit 77
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "http-browser: node is installed but npm is not (Debian: apt-get install npm)" >&2
	exit 1
fi

mkdir -p "$work" "$shots"
cp "$src/package.json" "$src/package-lock.json" "$src"/*.mjs \
	"$src/../harness/child.mjs" "$work/"
if ! cmp -s "$src/package-lock.json" "$work/.installed-lock.json" ||
   [ ! -d "$work/node_modules/playwright-core" ]; then
	echo "http-browser: npm ci in $work"
	(cd "$work" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error) >&2
	cp "$src/package-lock.json" "$work/.installed-lock.json"
fi

cd "$work"
CHROMIUM="$chromium" SCREENSHOTS="$shots" exec node --test --test-reporter=spec browser.test.mjs
