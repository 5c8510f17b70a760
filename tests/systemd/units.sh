#!/bin/sh
# units.sh BUILT_UNITS SOURCE_UNITS BERTHD MAN_BUILD_DIR: `systemd-analyze
# verify` on the system and the user units as meson configured them, with
# ExecStart pointed at the built berthd (verify checks that the command
# exists) and the man pages of Documentation= in a MANPATH (verify looks
# them up too). verify exits 0 on unknown keys and bad values, printing
# a warning, so any output is a failure too. Exit 77 (meson's "skipped")
# only when systemd-analyze is not installed or cannot start at all.
set -u
built=$1
src=$2
berthd=$3
mandir=$4
if ! command -v systemd-analyze >/dev/null 2>&1; then
	echo "units: systemd-analyze is not installed (Debian: apt-get install systemd): skipping"
	exit 77
fi
work=$(mktemp -d /tmp/berth-units-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/system" "$work/user" "$work/run" "$work/man/man1" "$work/man/man8"
chmod 700 "$work/run"
# The installed path of berthd, whatever the prefix: replaced by the built one.
for f in "$built/berthd.service" "$src/berthd.socket"; do
	sed "s|^ExecStart=[^ ]*/berthd |ExecStart=$berthd |" "$f" >"$work/system/${f##*/}"
done
sed "s|^ExecStart=[^ ]*/berthd |ExecStart=$berthd |" "$built/berthd-user.service" >"$work/user/berthd.service"
cp "$src/user/berthd.socket" "$work/user/"
man=
if [ "${MAN:-no}" = yes ]; then
	ln -s "$mandir/berth.1" "$work/man/man1/berth.1"
	ln -s "$mandir/berthd.8" "$work/man/man8/berthd.8"
else
	echo "units: no man pages were built (scdoc is missing): Documentation= is not checked"
	man=--man=no
fi

# Can systemd-analyze run here at all? A unit known to be good.
printf '[Service]\nExecStart=/bin/true\n' >"$work/probe.service"
if ! systemd-analyze verify --man=no "$work/probe.service" >"$work/probe.log" 2>&1; then
	cat "$work/probe.log"
	echo "units: systemd-analyze verify cannot run here: skipping"
	exit 77
fi

failed=0
verify() {
	what=$1
	shift
	if MANPATH="$work/man" XDG_RUNTIME_DIR="$work/run" HOME="$work" \
		systemd-analyze "$@" >"$work/out" 2>&1 && [ ! -s "$work/out" ]; then
		echo "ok: $what"
	else
		echo "FAIL: $what:"
		cat "$work/out"
		failed=1
	fi
}
# $man is empty or one word.
# shellcheck disable=SC2086
verify "systemd-analyze verify: the system units" verify $man \
	"$work/system/berthd.socket" "$work/system/berthd.service"
# shellcheck disable=SC2086
verify "systemd-analyze --user verify: the user units" --user verify $man \
	"$work/user/berthd.socket" "$work/user/berthd.service"
# The check itself catches a broken unit.
printf '[Service]\nExecStart=%s\nKillMode=mixd\n' "$berthd" >"$work/broken.service"
if MANPATH="$work/man" systemd-analyze verify --man=no "$work/broken.service" 2>&1 | grep -q mixd; then
	echo "ok: a broken unit is reported"
else
	echo "FAIL: systemd-analyze verify did not report KillMode=mixd"
	failed=1
fi
exit $failed
