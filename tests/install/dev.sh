#!/bin/sh
# dev.sh DEV: `./dev run` as a new user meets it, with meson, ninja,
# dpkg-query and berthd replaced by stubs in a scratch copy (a real build
# takes minutes; what is tested is dev's own logic):
#   - a failed build shows the compiler's output and exits non-zero;
#   - a good build prints nothing of meson's or ninja's;
#   - it prints `export BERTH_SOCKET=ABSOLUTE_PATH` for the socket berthd
#     serves, with or without XDG_RUNTIME_DIR, for a relative --socket, and
#     quoted when the path needs it, and berthd gets that socket;
#   - it prints those lines only once berthd answers on the socket, and not
#     at all when berthd ends before (then it exits with berthd's status);
#   - run from another folder, the relative paths given to berthd are that
#     folder's, in both --opt VALUE and --opt=VALUE forms, while the default
#     database stays the clone's ./berth.db.
# (devrun.sh runs ./dev run with the real berthd: hangups, real failures.)
set -u
dev=$1
work=$(mktemp -d /tmp/berth-dev-XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=check.sh
. "$(dirname "$0")/check.sh"
show() {
	echo "---- stderr ----"
	cat "$err"
	echo "---- berthd's arguments ----"
	cat "$clone/args" 2>/dev/null
}

mkdir -p "$work/bin"
cat >"$work/bin/dpkg-query" <<'STUB'
#!/bin/sh
echo "install ok installed"
STUB
cat >"$work/bin/meson" <<'STUB'
#!/bin/sh
# meson setup DIR ...: chatter, then a configured folder.
echo "The Meson build system"
mkdir -p "$2" && : >"$2/build.ninja"
STUB
# The stub berthd writes its arguments to CLONE/args, then, unless asked to
# fail, makes its socket (the last --socket, else the XDG one) and serves
# until the stub berth has answered dev's check on it.
mkdir -p "$work/stubs"
cat >"$work/stubs/berthd" <<'STUB'
#!/bin/sh
clone=$(cd "$(dirname "$0")/../.." && pwd)
for a in "$@"; do echo "$a"; done >"$clone/args"
sock=${XDG_RUNTIME_DIR:-}/berth/berth.sock
prev=
for a in "$@"; do
	[ "$prev" = --socket ] && sock=$a
	case $a in --socket=*) sock=${a#--socket=} ;; --workers) echo "berthd: --workers takes a number" >&2; exit 2 ;; esac
	prev=$a
done
mkdir -p "$(dirname "$sock")"
sleep 0.3
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$sock" || exit 1
for _ in $(seq 100); do
	[ -e "$clone/answered" ] && break
	sleep 0.1
done
rm -f "$sock"
STUB
cat >"$work/stubs/berth" <<'STUB'
#!/bin/sh
# berth --socket SOCK info
[ -S "$2" ] || exit 1
: >"$(cd "$(dirname "$0")/../.." && pwd)/answered"
STUB
cat >"$work/bin/ninja" <<STUB
#!/bin/sh
echo "ninja: Entering directory \\\`build'"
if [ -f broken ]; then
	echo "../log/log.c:131:28: error: expected ';' before '}' token"
	echo "ninja: build stopped: subcommand failed."
	exit 1
fi
mkdir -p build/berthd build/cli
cp "$work/stubs/berthd" build/berthd/berthd
cp "$work/stubs/berth" build/cli/berth
chmod +x build/berthd/berthd build/cli/berth
echo "[8/8] Linking target berthd/berthd"
STUB
chmod +x "$work/bin/"*

# run NAME [ENV=VALUE...] -- [ARGS...]: ./dev run in a fresh clone named
# NAME; its stderr is in $err and its status in $status.
run() {
	clone=$work/$1
	shift
	rm -rf "$clone"
	mkdir -p "$clone"
	cp "$dev" "$clone/dev"
	err=$clone.err
	envs=
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		envs="$envs $1"
		shift
	done
	shift
	[ -n "${broken:-}" ] && : >"$clone/broken"
	# shellcheck disable=SC2086
	(cd "${from:-$clone}" && env -u XDG_RUNTIME_DIR PATH="$work/bin:$PATH" $envs sh "$clone/dev" run "$@") \
		>"$clone.out" 2>"$err" </dev/null
	status=$?
}

broken=yes run broken --
check "a failed build exits non-zero" '[ $status -ne 0 ]'
check "a failed build shows the compiler's error" \
	'grep -q "log.c:131:28: error: expected" "$err"'
broken=

run quiet --
check "a good build prints nothing of meson's or ninja's" \
	'! grep -q -e "Meson build system" -e "Entering directory" -e Linking "$err" "$clone.out"'
check "without XDG_RUNTIME_DIR: export BERTH_SOCKET=CLONE/berth.sock" \
	'grep -qx "export BERTH_SOCKET=$clone/berth.sock" "$err"'
check "... and berthd is given that socket" \
	'grep -qx -- --socket "$clone/args" && grep -qx "$clone/berth.sock" "$clone/args"'
check "the berth line names the built berth" \
	'grep -qx "berth=$clone/build/cli/berth" "$err"'

run xdg "XDG_RUNTIME_DIR=$work/run" --
check "with XDG_RUNTIME_DIR: export BERTH_SOCKET=\$XDG_RUNTIME_DIR/berth/berth.sock" \
	'grep -qx "export BERTH_SOCKET=$work/run/berth/berth.sock" "$err" &&
	 ! grep -qx -- --socket "$clone/args"'

run relative -- --socket ./b.sock
check "a relative --socket is printed as an absolute path" \
	'grep -qx "export BERTH_SOCKET=$clone/b.sock" "$err"'

run "with space" --
check "a path with a space is quoted" \
	'grep -qx "export BERTH_SOCKET='"'"'$clone/berth.sock'"'"'" "$err"'

# berthd ended before it served: none of the lines, and its status.
run usage -- --workers x
check "berthd ending before it serves: no lines to paste, and berthd's status (2)" \
	'[ $status -eq 2 ] && ! grep -q -e "berthd serves" -e BERTH_SOCKET "$err" &&
	 grep -q "takes a number" "$err"'
check "the lines to paste come once berthd answered on its socket" \
	'grep -qx "export BERTH_SOCKET=$work/quiet/berth.sock" "$work/quiet.err" &&
	 [ -e "$work/quiet/answered" ]'

# From another folder: the relative paths are that folder's.
mkdir -p "$work/elsewhere"
from=$work/elsewhere run from-elsewhere -- --db ./r.db --tools ./mytools \
	--socket=./s.sock --token-file tk --principals=p.json --tools /abs/tools
from=
check "run from another folder: relative --opt VALUE paths are the caller's" \
	'grep -qx "$work/elsewhere/r.db" "$clone/args" &&
	 grep -qx "$work/elsewhere/mytools" "$clone/args" &&
	 grep -qx "$work/elsewhere/tk" "$clone/args"'
check "... and --opt=VALUE ones, and an absolute path stays as it is" \
	'grep -qx -- "--socket=$work/elsewhere/s.sock" "$clone/args" &&
	 grep -qx -- "--principals=$work/elsewhere/p.json" "$clone/args" &&
	 grep -qx /abs/tools "$clone/args"'
check "... the printed socket is the caller's, and the default database the clone's" \
	'grep -qx "export BERTH_SOCKET=$work/elsewhere/s.sock" "$err" &&
	 [ "$(head -n 2 "$clone/args" | tr "\n" " ")" = "--db ./berth.db " ]'
run pg -- --db postgres://u@h/db
check "a postgres:// --db is left as it is" 'grep -qx "postgres://u@h/db" "$clone/args"'

# --help is asked for: its usage and 0 (before: 2); a word dev does not
# know is the usage error.
sh "$dev" --help >"$work/help.out" 2>&1
status=$?
check "./dev --help prints its usage and exits 0" \
	'[ $status -eq 0 ] && grep -q "dev test" "$work/help.out"'
sh "$dev" frobnicate >/dev/null 2>&1
status=$?
check "./dev with an unknown word exits 2" '[ $status -eq 2 ]'

summary
