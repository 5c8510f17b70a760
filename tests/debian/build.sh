#!/bin/sh
# tests/debian/build.sh: build berth's Debian packages from debian/, check
# them with lintian, and install and start them on a clean Debian 12.
#
#   tests/debian/build.sh [OUT_DIR]
#
# Run as root on Debian 12, from a clone (uncommitted files are included).
# It takes 5 to 10 minutes, so it is not part of ./dev test; run it after
# changing debian/, the install layout or the systemd units.
#
#   1. Copies the source to a scratch folder and runs
#      `dpkg-buildpackage -us -uc -b` there; the .deb files end in OUT_DIR
#      (default: a scratch folder, printed). Checks what the postinst of a
#      fresh install enables (the system units, no user unit) and that
#      every docs/X.md the README and man pages name is in
#      /usr/share/doc/berth/docs.
#   2. lintian on the .changes: any error or warning fails (the info tags
#      are shown too).
#   3. In a minimal Debian 12 (bookworm) made by debootstrap and kept in
#      $BERTH_DEBIAN_ROOT (default /var/tmp/berth-bookworm-base) for the
#      next run, copied afresh each time: installs the packages with apt
#      (which fetches their dependencies, so a missing Depends shows), and
#      checks the berth user, /var/lib/berth and the units
#      (systemd-analyze verify). There is no systemd running in a chroot,
#      so it starts berthd as berthd.service would, through systemd's own
#      socket activation (systemd-socket-activate on the socket unit's
#      path, as the berth user, with the unit's ExecStart), and runs a job
#      through the socket with the installed berth. Then it builds the
#      example of <berth/berth.h> with pkg-config against libberth-dev,
#      purges the packages and checks what purge leaves.
#
# Packages it installs on this machine when missing: dpkg-dev, debhelper,
# lintian, fakeroot, debootstrap and the build dependencies of
# debian/control. The last line is "N passed, N failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
base=${BERTH_DEBIAN_ROOT:-/var/tmp/berth-bookworm-base}
scratch=$(mktemp -d /var/tmp/berth-debian-XXXXXX)
out=${1:-$scratch/out}
root=$scratch/root
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
finish() {
	echo "debian: the logs and packages are in $scratch"
	echo "$passed passed, $failed failed"
	[ $failed -eq 0 ]
	exit $?
}
activator=
cleanup() {
	# berthd (the activator execs it) first: it keeps files of the
	# chroot open.
	[ -n "$activator" ] && kill "$activator" 2>/dev/null && wait "$activator"
	mountpoint -q "$root/proc" 2>/dev/null && umount "$root/proc"
	# Never delete through a mount that would not go away.
	mountpoint -q "$root/proc" 2>/dev/null || rm -rf "$root"
	rm -rf "$scratch/src"
}
trap cleanup EXIT
# sh runs the EXIT trap on exit, not when a signal ends it: Ctrl-C, a
# closed terminal or a kill become exits, so that berthd stops and the
# chroot is unmounted then too.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$(id -u)" != 0 ]; then
	echo "tests/debian/build.sh: run it as root (it installs packages and makes a chroot)" >&2
	exit 2
fi
need="dpkg-dev debhelper lintian fakeroot debootstrap
	$(sed -n '/^Build-Depends:/,/^[A-Z]/p' "$src/debian/control" |
		sed -e 's/^Build-Depends://' -e '/^[A-Z]/d' -e 's/([^)]*)//g' -e 's/,/ /g' -e 's/debhelper-compat//')"
missing=$(for p in $need; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
	grep -q '^install ok installed' || printf '%s ' "$p"; done)
if [ -n "$missing" ]; then
	echo "debian: installing $missing"
	apt-get install -y -qq $missing >/dev/null || { echo "FAIL: apt-get install $missing"; exit 1; }
fi

# ---- 1. build ------------------------------------------------------------
mkdir -p "$scratch/src/berth" "$out"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	# What the clone has, committed or not, without build folders.
	(cd "$src" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$scratch/src/berth"
else
	(cd "$src" && tar -cf - --exclude='./build*' .) | tar -xf - -C "$scratch/src/berth"
fi
echo "debian: dpkg-buildpackage -us -uc -b in $scratch/src/berth"
if (cd "$scratch/src/berth" && dpkg-buildpackage -us -uc -b) >"$scratch/build.log" 2>&1; then
	ok "dpkg-buildpackage -us -uc -b"
else
	tail -n 60 "$scratch/build.log"
	bad "dpkg-buildpackage -us -uc -b (the whole log: $scratch/build.log)"
	finish
fi
mv "$scratch"/src/*.deb "$scratch"/src/*.changes "$scratch"/src/*.buildinfo "$out/"
ls -l "$out"
deb=$(ls "$out"/berth_*.deb | head -n 1)

# The user units are a user's to turn on (berthd(8)): a postinst that
# enabled them would link them under /etc/systemd/user, and every user who
# logs in would get a berthd of their own. The postinst runs here as on a
# fresh install (configure, no old version), with every command it calls
# a stub that logs its arguments; deb-systemd-helper answers as on a system
# that never had berth: no unit debian-installed, and was-enabled true (its
# default for a unit it never saw).
mkdir -p "$scratch/stubs"
for c in adduser install deb-systemd-helper deb-systemd-invoke systemctl; do
	cat >"$scratch/stubs/$c" <<STUB
#!/bin/sh
echo "$c \$*" >>"$scratch/postinst.calls"
case "\$*" in *debian-installed*) exit 1 ;; esac
exit 0
STUB
	chmod +x "$scratch/stubs/$c"
done
dpkg-deb -I "$deb" postinst >"$scratch/postinst"
PATH="$scratch/stubs:$PATH" sh "$scratch/postinst" configure >/dev/null 2>&1
status=$?
check "the postinst, on a fresh install, enables the system units" \
	'[ $status -eq 0 ] && grep -qx "deb-systemd-helper enable berthd.socket" "$scratch/postinst.calls"'
check "... and no user unit (dh_installsystemduser --no-enable)" \
	'! grep -q "deb-systemd-helper.* --user enable" "$scratch/postinst.calls"'

# Every document the installed README and man pages point to, at the
# docs/X.md path they give (compressed or not, as dh_compress left it).
dpkg-deb -c "$deb" | sed 's/.* \.\///' >"$scratch/contents"
refs=$(cat "$src/README.md" "$src"/man/*.scd | grep -o 'docs/[A-Z][A-Z]*\.md' | sort -u)
missing=
for r in $refs; do
	grep -qx "usr/share/doc/berth/$r\(\.gz\)\{0,1\}" "$scratch/contents" || missing="$missing $r"
done
check "the package has every docs/X.md the README and man pages name, under /usr/share/doc/berth/docs (missing:${missing:- none})" \
	'[ -n "$refs" ] && [ -z "$missing" ]'

# ---- 2. lintian ----------------------------------------------------------
lintian --display-info --fail-on error,warning "$out"/*.changes >"$scratch/lintian.log" 2>&1
status=$?
cat "$scratch/lintian.log"
check "lintian: no error or warning" '[ $status -eq 0 ]'

# ---- 3. install and start on a clean Debian 12 ---------------------------
if [ ! -x "$base/usr/bin/apt-get" ]; then
	echo "debian: debootstrap --variant=minbase bookworm $base (once)"
	rm -rf "$base.new"
	if ! debootstrap --variant=minbase bookworm "$base.new" http://deb.debian.org/debian \
		>"$scratch/debootstrap.log" 2>&1; then
		tail -n 20 "$scratch/debootstrap.log"
		bad "debootstrap bookworm"
		finish
	fi
	mv "$base.new" "$base"
fi
cp -a "$base" "$root"
mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
mkdir -p "$root/debs"
cp "$out"/*.deb "$root/debs/"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# systemd for systemd-analyze and systemd-socket-activate only: nothing
# runs it as an init here.
in_root apt-get update -qq >/dev/null 2>&1
if in_root sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /debs/*.deb systemd gcc pkg-config' \
	>"$scratch/install.log" 2>&1; then
	ok "apt-get install berth libberth0 libberth-dev (dependencies from the archive)"
else
	tail -n 30 "$scratch/install.log"
	bad "apt-get install the packages"
	finish
fi
check "the berth system user, with /var/lib/berth as its home" \
	'in_root getent passwd berth | grep -q "^berth:x:[0-9]*:[0-9]*:.*:/var/lib/berth:/usr/sbin/nologin$"'
check "/var/lib/berth is berth's, mode 0700" \
	'[ "$(in_root stat -c "%U %a" /var/lib/berth)" = "berth 700" ]'
check "the units are installed and enabled" \
	'[ -L "$root/etc/systemd/system/sockets.target.wants/berthd.socket" ] &&
	 [ -L "$root/etc/systemd/system/multi-user.target.wants/berthd.service" ]'
check "no user unit is enabled for every user (none in /etc/systemd/user)" \
	'! ls "$root"/etc/systemd/user/*.wants/berthd.* >/dev/null 2>&1'
in_root systemd-analyze verify --man=no /lib/systemd/system/berthd.socket \
	/lib/systemd/system/berthd.service >"$scratch/verify.log" 2>&1
status=$?
cat "$scratch/verify.log"
check "systemd-analyze verify the installed units" '[ $status -eq 0 ] && [ ! -s "$scratch/verify.log" ]'

# An operator's tools: the example ones (they use jq, which berth
# recommends).
cp -a "$root"/usr/share/berth/examples/tools/. "$root/etc/berth/tools/"

# Start berthd as berthd.service would, from the units' own lines.
exec_start=$(sed -n 's/^ExecStart=//p' "$root/lib/systemd/system/berthd.service" |
	sed 's|${STATE_DIRECTORY}|/var/lib/berth|')
listen=$(sed -n 's/^ListenStream=//p' "$root/lib/systemd/system/berthd.socket")
name=$(sed -n 's/^FileDescriptorName=//p' "$root/lib/systemd/system/berthd.socket")
mkdir -p "$root/run/berth"
# Not through in_root: a function run in the background is a subshell,
# and $! would be its pid rather than berthd's.
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
	systemd-socket-activate -l "$listen" --fdname="$name" \
	setpriv --reuid=berth --regid=berth --init-groups $exec_start \
	>"$scratch/berthd.log" 2>&1 &
activator=$!
# The socket exists once systemd-socket-activate listens; it gets the
# owner and mode the socket unit gives it. berthd starts with the first
# connection, which the berth command below makes (as root, whom berthd's
# peer check lets in as the unit's socket mode does).
for _ in $(seq 100); do [ -S "$root$listen" ] && break; sleep 0.1; done
in_root chown "$(sed -n 's/^SocketUser=//p' "$root/lib/systemd/system/berthd.socket"):$(sed -n 's/^SocketGroup=//p' "$root/lib/systemd/system/berthd.socket")" "$listen"
in_root chmod "$(sed -n 's/^SocketMode=//p' "$root/lib/systemd/system/berthd.socket")" "$listen"
in_root berth --socket "$listen" --json submit weather-tool '{"location":"Seattle"}' --wait \
	>"$scratch/job.json" 2>&1
check "berthd starts on the first connection (socket activation) and runs a job" \
	'grep -q "\"status\": *\"completed\"" "$scratch/job.json"'
in_root berth --socket "$listen" info >"$scratch/info.txt" 2>&1
check "berthd serves its database in /var/lib/berth" 'grep -q "/var/lib/berth/berth.db" "$scratch/info.txt"' 
kill $activator 2>/dev/null
wait $activator
status=$?
activator=
check "berthd stops cleanly on SIGTERM (exit 0)" '[ $status -eq 0 ]'
[ $failed -eq 0 ] || { cat "$scratch/job.json" "$scratch/info.txt" "$scratch/berthd.log"; }

# The example of berth.h against libberth-dev.
sed -n '/^ \*\t#include <berth\/berth.h>/,/^ \* [A-Z]/p' "$root/usr/include/berth/berth.h" |
	sed '$d' | sed -e 's/^ \*\t//' -e 's/^ \*$//' >"$root/tmp/tool.c"
check "the example of berth.h builds with pkg-config against libberth-dev" \
	'in_root sh -c "cd /tmp && cc -Wall -Wextra -Werror tool.c \$(pkg-config --cflags --libs berth) -o tool && ./tool --help >/dev/null"'

# Purge: the packages and the database go; the user stays (Debian keeps
# system users), and so do the files the operator put in /etc/berth/tools.
in_root sh -c 'DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq berth libberth-dev libberth0' \
	>"$scratch/purge.log" 2>&1
check "apt-get purge removes the packages, their units and /var/lib/berth" \
	'[ ! -e "$root/usr/bin/berthd" ] && [ ! -e "$root/lib/systemd/system/berthd.service" ] &&
	 [ ! -e "$root/var/lib/berth" ] && [ ! -e "$root/usr/share/berth" ]'
check "purge leaves the operator's tools in /etc/berth/tools, and nothing else of berth's" \
	'[ "$(ls "$root/etc/berth")" = tools ] &&
	 [ "$(ls "$root/etc/berth/tools")" = "$(ls "$src/examples/tools")" ]'
finish
