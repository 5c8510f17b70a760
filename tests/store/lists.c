/*
 * lists.c: see lists.h.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/store/lists.h"

int lists(struct store *st, const struct store_filter *flt, int page,
	  char ids[][40], int max)
{
	char *cursor = NULL;
	char last[40] = "\x7f";
	int seen = 0;
	do {
		struct store_job **jobs;
		size_t n;
		char *next;
		assert_int_equal(store_list(st, flt, page, cursor, &jobs, &n, &next), 0);
		assert_true(n <= (size_t)page);
		for (size_t i = 0; i < n; i++) {
			assert_true(strcmp(jobs[i]->id, last) < 0);
			snprintf(last, sizeof(last), "%s", jobs[i]->id);
			if (flt->tool)
				assert_string_equal(jobs[i]->tool, flt->tool);
			if (flt->run_id)
				assert_string_equal(jobs[i]->run_id, flt->run_id);
			if (flt->status_mask)
				assert_true(flt->status_mask & STORE_MASK(jobs[i]->status));
			if (flt->id_prefix)
				assert_memory_equal(jobs[i]->id, flt->id_prefix,
						    strlen(flt->id_prefix));
			if (ids != NULL) {
				assert_true(seen < max);
				snprintf(ids[seen], 40, "%s", jobs[i]->id);
			}
			seen++;
			store_job_free(jobs[i]);
		}
		free(jobs);
		free(cursor);
		cursor = next;
		if (next != NULL)
			assert_int_equal(n, (size_t)page);
	} while (cursor != NULL);
	return seen;
}
