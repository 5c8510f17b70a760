/*
 * copy_main.c: berth-store-copy SQLITE_PATH postgres://...
 *
 * Moves a single-node SQLite database to PostgreSQL with store_copy (jobs,
 * payloads, decisions, events and their seqs, job logs, tool state). The
 * SQLite database must not be in use; the PostgreSQL one must be empty.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

int main(int argc, char **argv)
{
	static const char usage[] =
		"usage: berth-store-copy SQLITE_PATH postgres://USER@HOST:PORT/DB\n";

	/* Help asked for goes to stdout with 0, as berthd's and berth's. */
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		fputs(usage, stdout);
		fputs("Copy the berthd database SQLITE_PATH (not in use) into an empty\n"
		      "PostgreSQL database; see berth-store-copy(1).\n", stdout);
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "berth-store-copy: %s\n%s",
			argc < 3 ? "missing arguments" : "too many arguments", usage);
		return 2;
	}
	char *err = NULL;
	int rc = store_copy(argv[1], argv[2], &err);
	if (rc != 0) {
		fprintf(stderr, "berth-store-copy: %s\n", err != NULL ? err : "failed");
		free(err);
		return 1;
	}
	printf("berth-store-copy: copied %s to PostgreSQL\n", argv[1]);
	return 0;
}
