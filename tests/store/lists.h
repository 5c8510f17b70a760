/*
 * lists.h: a check of store_list's pages, shared by the SQLite store's
 * tests (test_store.c) and the PostgreSQL store's (tests/pg).
 */
#ifndef BERTH_TESTS_STORE_LISTS_H
#define BERTH_TESTS_STORE_LISTS_H

#include "store/store.h"

/* lists reads every page of `page` jobs of st that match flt, newest
 * first, and checks each page: every job matches each of flt's filters,
 * ids fall strictly from one job to the next, and only the last page is
 * short. The ids go into ids (at most max; none when ids is NULL).
 * Returns how many jobs it read. */
int lists(struct store *st, const struct store_filter *flt, int page,
	  char ids[][40], int max);

#endif
