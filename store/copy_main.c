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
	if (argc != 3 || strcmp(argv[1], "--help") == 0) {
		fprintf(stderr, "usage: berth-store-copy SQLITE_PATH postgres://USER@HOST:PORT/DB\n");
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
