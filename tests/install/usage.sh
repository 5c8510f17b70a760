#!/bin/sh
# usage.sh BERTHD [BERTH_STORE_COPY]: what an operator is told when a
# database is given wrong, in the words of what they typed:
#   - berthd --migrate-from with a SQLite --db, or a URL to copy from, is a
#     usage error naming the option (before: store_copy's own words, "store_copy
#     copies a SQLite file to a postgres:// URL", and exit 1);
#   - berth-store-copy --help and -h print the usage on stdout and exit 0
#     (before: stderr and 2), and a SQLite destination is named as such;
#   - berthd --db on a SQLite database of another program is refused,
#     naming the file and its tables, and leaves it as it was (before: berth's
#     tables were added to it).
# BERTH_STORE_COPY is empty when berth is built without PostgreSQL.
set -u
berthd=$1
copy=${2:-}
# shellcheck source=check.sh
. "$(dirname "$0")/check.sh"
work=$(mktemp -d /tmp/berth-usage-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
show() {
	echo "---- exit $status; stdout ----"
	cat out
	echo "---- stderr ----"
	cat err
}
# run COMMAND...: its output in out and err, its status in $status; a
# berthd that serves instead of refusing is stopped after $limit s (10).
run() {
	timeout "${limit:-10}" "$@" >out 2>err </dev/null
	status=$?
}

run "$berthd" --migrate-from app.db --db other.db
check "berthd --migrate-from with a SQLite --db: exit 2, says --db must be a postgres:// URL" \
	'[ $status -eq 2 ] && grep -q -- "--db must be a postgres:// or postgresql:// URL, not .other.db." err &&
	 ! grep -q store_copy err && [ ! -e other.db ] && [ ! -e app.db ]'
run "$berthd" --migrate-from postgres://u@h/db --db postgres://u@h/db2
check "berthd --migrate-from a URL: exit 2, says it takes a SQLite file's path" \
	'[ $status -eq 2 ] && grep -q -- "--migrate-from takes the path of the SQLite database" err'

if [ -n "$copy" ]; then
	for h in --help -h; do
		run "$copy" $h
		check "berth-store-copy $h: the usage on stdout, exit 0" \
			'[ $status -eq 0 ] && grep -q "^usage: berth-store-copy SQLITE_PATH" out && [ ! -s err ]'
	done
	run "$copy" app.db
	check "berth-store-copy with one argument: the usage on stderr, exit 2" \
		'[ $status -eq 2 ] && grep -q "usage: berth-store-copy" err'
	run "$copy" app.db other.db
	check "berth-store-copy into a SQLite file: exit 1, names it as not a postgres:// URL" \
		'[ $status -eq 1 ] && grep -q "other.db is not a postgres:// or postgresql:// URL" err &&
		 ! grep -q store_copy err'
fi

if command -v python3 >/dev/null 2>&1; then
	python3 -c 'import sqlite3; c = sqlite3.connect("app.db");
c.execute("CREATE TABLE users (name TEXT)"); c.execute("INSERT INTO users VALUES (1)"); c.commit()'
	chmod 600 app.db
	cp app.db app.db.before
	run "$berthd" --db app.db --socket a.sock --quiet
	check "berthd --db on another program's SQLite database: refused, names it and its tables, leaves it as it was" \
		'[ $status -eq 1 ] && grep -q "the database app.db is a SQLite database of another program (tables: users)" err &&
		 cmp -s app.db app.db.before && [ ! -e app.db-wal ] && [ ! -e a.sock ]'
	rm -f app.db app.db.*
	: >app.db
	chmod 600 app.db
	limit=3 run "$berthd" --db app.db --socket a.sock --quiet
	check "berthd --db on an empty file: serves (stopped by timeout)" '[ $status -eq 124 ]'
fi

summary
