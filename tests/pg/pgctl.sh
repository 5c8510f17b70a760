#!/bin/sh
# pgctl.sh start|stop|url DIR PORT: a private PostgreSQL server for berth's
# tests, from Debian's server binaries, never the system service.
#
#   start  makes a cluster in DIR (initdb, once), starts it listening on
#          127.0.0.1:PORT and on a Unix socket in DIR, creates the database
#          "berth", and prints the URL to use with --db
#          (postgres://berth@127.0.0.1:PORT/berth)
#   stop   stops the server of DIR (fast shutdown) and leaves the files
#   url    prints the URL again
#
# initdb refuses to run as root, so as root the server runs as the
# "postgres" user (created by the postgresql package), or "berthpg" when
# there is none. Exit status 77 (the test harnesses' "skip") when the server
# binaries are not installed: install them with
#   apt-get install -y postgresql
set -eu

cmd=${1:-}
dir=${2:-}
port=${3:-}
if [ -z "$cmd" ] || [ -z "$dir" ] || [ -z "$port" ]; then
	echo "usage: pgctl.sh start|stop|url DIR PORT" >&2
	exit 2
fi

bindir=${PG_BINDIR:-}
if [ -z "$bindir" ]; then
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/initdb" ] && bindir=$d
	done
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ] || [ ! -x "$bindir/pg_ctl" ]; then
	echo "pgctl.sh: the PostgreSQL server binaries (initdb, pg_ctl) are not installed; apt-get install -y postgresql" >&2
	exit 77
fi

url="postgres://berth@127.0.0.1:$port/berth"

# as runs a command as the server's user.
if [ "$(id -u)" = 0 ]; then
	user=postgres
	if ! id "$user" >/dev/null 2>&1; then
		user=berthpg
		id "$user" >/dev/null 2>&1 || useradd --system --no-create-home "$user"
	fi
	as() { runuser -u "$user" -- "$@"; }
else
	user=$(id -un)
	as() { "$@"; }
fi

case "$cmd" in
start)
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		[ "$(id -u)" = 0 ] && chown "$user" "$dir"
		# trust over 127.0.0.1 and the private socket only: a test
		# cluster on a private port, gone with its directory.
		as "$bindir/initdb" -D "$dir/data" -U berth -A trust -E UTF8 \
			--no-locale >"$dir/initdb.log" 2>&1 || {
			cat "$dir/initdb.log" >&2
			exit 1
		}
	fi
	if as "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		echo "$url"
		exit 0
	fi
	# fsync stays on: the tests check durability claims. max_connections
	# covers three nodes (three connections each) and the tests' own.
	as "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" \
		start >/dev/null || {
		cat "$dir/server.log" >&2
		exit 1
	}
	if ! as "$bindir/psql" -h "$dir" -p "$port" -U berth -d postgres -tAc \
		"SELECT 1 FROM pg_database WHERE datname = 'berth'" 2>/dev/null | grep -q 1; then
		as "$bindir/createdb" -h "$dir" -p "$port" -U berth berth
	fi
	echo "$url"
	;;
stop)
	if [ -f "$dir/data/PG_VERSION" ]; then
		as "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
	fi
	;;
url)
	echo "$url"
	;;
*)
	echo "usage: pgctl.sh start|stop|url DIR PORT" >&2
	exit 2
	;;
esac
