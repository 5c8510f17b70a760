#!/bin/sh
# manpages.sh MAN_DIR BERTHD BERTH: the man pages (their scdoc sources, so
# that this runs without scdoc too) say what --help says: every option of
# `berthd --help` is in berthd.8, and every command of `berth --help` and
# every option of `berth COMMAND --help` is in berth.1; and the other way
# round, every option and command a man page describes is in --help, so
# that neither can keep what the other dropped.
set -u
man=$1
berthd=$2
berth=$3
work=$(mktemp -d /tmp/berth-manpages-XXXXXX)
trap 'rm -rf "$work"' EXIT
failed=0
passed=0

# options FILE: the long options a text names, one per line.
options() { grep -o -- '--[a-z][a-z-]*' "$1" | sort -u; }
# defined FILE: the options a man page describes (its item headings, such
# as "*-h*, *--help*").
defined() { grep '^[[:space:]]*\*-' "$1" | grep -o -- '--[a-z][a-z-]*' | sort -u; }
# compare WHAT LEFT RIGHT: every line of LEFT is in RIGHT.
compare() {
	missing=$(comm -23 "$2" "$3" | tr '\n' ' ')
	if [ -z "$missing" ]; then
		passed=$((passed + 1))
		echo "ok: $1"
	else
		failed=$((failed + 1))
		echo "FAIL: $1: $missing"
	fi
}

"$berthd" --help >"$work/berthd.help"
options "$work/berthd.help" >"$work/berthd.opts"
options "$man/berthd.8.scd" >"$work/berthd.8.opts"
defined "$man/berthd.8.scd" >"$work/berthd.8.defined"
compare "berthd(8) describes every option of berthd --help" "$work/berthd.opts" "$work/berthd.8.defined"
compare "berthd --help has every option berthd(8) describes" "$work/berthd.8.defined" "$work/berthd.opts"

# say WHAT PATTERN: --help and berthd(8) both match PATTERN (grep -E, with
# the man page's *bold* marks and line breaks taken out).
say() {
	tr '\n' ' ' <"$work/berthd.help" | tr -s ' ' >"$work/help.flat"
	tr '\n\t' '  ' <"$man/berthd.8.scd" | tr -d '*' | tr -s ' ' >"$work/man.flat"
	if grep -Eq -- "$2" "$work/help.flat" && grep -Eq -- "$2" "$work/man.flat"; then
		passed=$((passed + 1))
		echo "ok: $1"
	else
		failed=$((failed + 1))
		echo "FAIL: $1 (--help: $(grep -Ec -- "$2" "$work/help.flat"), berthd(8): $(grep -Ec -- "$2" "$work/man.flat"))"
	fi
}
# pg.c reads $BERTH_LEASE_MS when --lease-ms is not given.
say "berthd --help and berthd(8) name \$BERTH_LEASE_MS, --lease-ms's default" \
	'--lease-ms .*\$BERTH_LEASE_MS'
# parse_options takes --listen with --principals (their tokens) too.
say "berthd --help and berthd(8): --listen needs --token-file or --principals" \
	'--listen [^-]*needs --token-file or --principals'

"$berth" --help >"$work/berth.help"
sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' "$work/berth.help" | sort -u >"$work/commands"
sed -n '/^# COMMANDS/,/^# [A-Z]/s/^\*\([a-z][a-z-]*\)\*.*/\1/p' "$man/berth.1.scd" | sort -u >"$work/berth.1.commands"
compare "berth(1) describes every command of berth --help" "$work/commands" "$work/berth.1.commands"
compare "berth --help has every command berth(1) describes" "$work/berth.1.commands" "$work/commands"

cp "$work/berth.help" "$work/all.help"
while read -r c; do
	"$berth" "$c" --help >>"$work/all.help" 2>&1
done <"$work/commands"
options "$work/all.help" >"$work/berth.opts"
defined "$man/berth.1.scd" >"$work/berth.1.defined"
options "$man/berth.1.scd" >"$work/berth.1.opts"
compare "berth(1) names every option of berth and berth COMMAND --help" "$work/berth.opts" "$work/berth.1.opts"
compare "berth's --help texts have every option berth(1) describes" "$work/berth.1.defined" "$work/berth.opts"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
