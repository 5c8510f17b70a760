#!/bin/sh
# install.sh: what `meson install` gives a C user, tested as one would use it.
#
# It installs the build into a DESTDIR inside the build directory, checks
# the layout (headers, a shared libberth with its soname that exports only
# the public berth_ names, a static archive that holds every object, berth.pc,
# the binaries, the example tools, the man pages, the bash completion, the
# systemd units), then takes the example program out of the comment at the
# top of the installed <berth/berth.h> and builds it exactly as that
# comment says:
#
#   cc -Wall -Wextra -Werror tool.c $(pkg-config --cflags --libs berth)
#
# with PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR pointing into the DESTDIR
# (the sysroot is how pkg-config relocates a staged install), and once more
# against libberth.a alone. It runs the program with --help, then as a
# daemon that serves a job submitted with the installed berth.
#
# The environment (tests/install/meson.build) names the build, the source,
# the install directories and the compiler; SANITIZE is the build's
# b_sanitize (its objects need the sanitizer runtime at link time), MAN is
# "yes" when the man pages were built.
set -u
: "${BUILD:?}" "${PREFIX:?}" "${LIBDIR:?}" "${BINDIR:?}" "${DATADIR:?}" "${MANDIR:?}" "${INCLUDEDIR:?}" "${CC:=cc}"
work=$BUILD/tests/install/work
dest=$work/dest
failed=0
passed=0

pid=
# cleanup stops the example daemon (started below) while it runs: at the
# exit, and at the signals that end sh without its EXIT trap (meson's
# timeout sends SIGTERM), which become exits.
cleanup() { [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid"; }
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
# abs DIR: an install directory as an absolute path (meson's are relative
# to the prefix unless given absolute).
abs() { case $1 in /*) echo "$1" ;; *) echo "$PREFIX/$1" ;; esac; }

rm -rf "$work"
mkdir -p "$work"
if ! meson install -C "$BUILD" --destdir "$dest" --no-rebuild --quiet >"$work/install.log" 2>&1; then
	cat "$work/install.log"
	echo "FAIL: meson install"
	exit 1
fi
ok "meson install --destdir"

inc=$dest$(abs "$INCLUDEDIR")
lib=$dest$(abs "$LIBDIR")
bin=$dest$(abs "$BINDIR")
data=$dest$(abs "$DATADIR")
man=$dest$(abs "$MANDIR")

# ---- the layout ----------------------------------------------------------
check "headers: <berth/berth.h> and <berth/client.h>" \
	'[ -f "$inc/berth/berth.h" ] && [ -f "$inc/berth/client.h" ]'
# Whatever the public headers include is installed or a system header:
# they include nothing of berth's source tree.
check "headers include only system headers and jansson" \
	'! grep -h "^#include" "$inc"/berth/*.h | grep -v -e "<std[a-z]*\.h>" -e "<jansson\.h>"'
check "libberth.so.0 is the soname, libberth.so the link" \
	'[ "$(readlink "$lib/libberth.so")" = libberth.so.0 ] &&
	 readelf -d "$lib/libberth.so.0" | grep -q "SONAME.*\[libberth\.so\.0\]"'
nm -D --defined-only "$lib/libberth.so.0" | awk '$2 == "T" || $2 == "D" || $2 == "B" { sub(/@.*/, "", $3); print $3 }' >"$work/exported"
check "libberth.so exports only berth_ names" \
	'[ -s "$work/exported" ] && ! grep -v "^berth_" "$work/exported"'
check "libberth.so exports berth_main and the client API" \
	'grep -qx berth_main "$work/exported" && grep -qx berth_client_call "$work/exported"'
# A thin archive starts with "!<thin>" and holds only paths to objects that
# the build directory has; a real one holds the objects.
check "libberth.a is a real archive, not a thin one" \
	'[ "$(head -c 7 "$lib/libberth.a")" = "!<arch>" ]'
check "libberth.a holds every component (store, worker, api, schema, client, berth_main)" \
	'nm --defined-only "$lib/libberth.a" 2>/dev/null >"$work/archive" &&
	 grep -q " T berth_main$" "$work/archive" && grep -q " T store_open$" "$work/archive" &&
	 grep -q " T worker_create$" "$work/archive" && grep -q " T api_start$" "$work/archive" &&
	 grep -q " T schema_compile$" "$work/archive" && grep -q " T berth_client_connect$" "$work/archive"'
check "berth.pc" '[ -f "$lib/pkgconfig/berth.pc" ]'
check "berth and berthd" '[ -x "$bin/berth" ] && [ -x "$bin/berthd" ]'
check "the example tools, their scripts executable" \
	'[ -f "$data/berth/examples/tools/weather-tool.json" ] &&
	 [ -x "$data/berth/examples/tools/weather.sh" ] &&
	 [ -f "$data/berth/examples/schemas/weather-input.json" ]'
if [ "${MAN:-no}" = yes ]; then
	check "man pages berth(1) and berthd(8)" \
		'[ -s "$man/man1/berth.1" ] && [ -s "$man/man8/berthd.8" ]'
else
	echo "skip: man pages (scdoc was not found)"
fi
check "bash completion" '[ -f "$data/bash-completion/completions/berth" ]'
check "systemd units name the installed berthd" \
	'grep -q "^ExecStart=$(abs "$BINDIR")/berthd " "$dest$PREFIX/lib/systemd/system/berthd.service" &&
	 [ -f "$dest$PREFIX/lib/systemd/system/berthd.socket" ] &&
	 grep -q "^ExecStart=$(abs "$BINDIR")/berthd " "$dest$PREFIX/lib/systemd/user/berthd.service" &&
	 [ -f "$dest$PREFIX/lib/systemd/user/berthd.socket" ]'

# ---- the example of berth.h, built with pkg-config ------------------------
# The program is the indented block of the header's first comment, from its
# #include on, up to the paragraph after it.
sed -n '/^ \*\t#include <berth\/berth.h>/,/^ \* [A-Z]/p' "$inc/berth/berth.h" |
	sed '$d' | sed -e 's/^ \*\t//' -e 's/^ \*$//' >"$work/tool.c"
check "the example is in berth.h's comment" \
	'grep -q "return berth_main(argc, argv, tools, 1);" "$work/tool.c"'

export PKG_CONFIG_PATH="$lib/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$dest"
san=
[ -n "${SANITIZE:-}" ] && [ "$SANITIZE" != none ] && san="-fsanitize=$SANITIZE"
cd "$work"
# shellcheck disable=SC2046 # word splitting is pkg-config's way
if $CC $san -Wall -Wextra -Werror -o tool tool.c $(pkg-config --cflags --libs berth) 2>"$work/cc.log"; then
	ok "cc -Wall -Wextra -Werror tool.c \$(pkg-config --cflags --libs berth)"
else
	cat "$work/cc.log"
	bad "cc -Wall -Wextra -Werror tool.c \$(pkg-config --cflags --libs berth)"
fi
check "the example links libberth.so.0" 'readelf -d tool | grep -q "NEEDED.*\[libberth\.so\.0\]"'

# The static archive alone: nothing of libberth.so is needed. The
# libraries berth uses are linked shared, as a distribution has them
# (`pkg-config --static` would ask for libpq's own static archives).
# shellcheck disable=SC2046
if $CC $san -Wall -Wextra -Werror -o tool-static tool.c $(pkg-config --cflags berth) \
	"$lib/libberth.a" $(pkg-config --libs-only-l $(pkg-config --print-requires berth) \
	$(pkg-config --print-requires-private berth)) -pthread -lm 2>"$work/cc-static.log" &&
	! readelf -d tool-static | grep -q libberth; then
	ok "the example links against libberth.a alone"
else
	cat "$work/cc-static.log"
	bad "the example links against libberth.a alone"
fi

export LD_LIBRARY_PATH="$lib"
if ./tool --help >"$work/help.out" 2>&1 && grep -q -- "--tools DIR" "$work/help.out"; then
	ok "the example runs: tool --help"
else
	cat "$work/help.out"
	bad "the example runs: tool --help"
fi

# As a daemon: a job of its weather-tool, through the installed berth.
sock=$work/berth.sock
./tool --db "$work/berth.db" --socket "$sock" >"$work/tool.log" 2>&1 &
pid=$!
berth() { "$bin/berth" --socket "$sock" "$@"; }
up=no
for _ in $(seq 600); do
	if berth info >/dev/null 2>&1; then up=yes; break; fi
	kill -0 $pid 2>/dev/null || break
	sleep 0.1
done
check "the example serves its socket" '[ $up = yes ]'
berth --json submit weather-tool '{"location":"Seattle"}' --wait >"$work/job.json" 2>&1
check "the example runs a job to completion" \
	'grep -q "\"status\": *\"completed\"" "$work/job.json" &&
	 grep -q "\"conditions\": *\"sunny\"" "$work/job.json"'
kill -TERM $pid 2>/dev/null
wait $pid
status=$?
pid=
check "the example stops cleanly on SIGTERM (exit 0)" '[ $status = 0 ]'
if [ $failed -ne 0 ]; then
	echo "---- the example's log ----"
	cat "$work/tool.log"
	cat "$work/job.json"
fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
