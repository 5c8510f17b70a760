/*
 * idmap.h: a map from job ids (short strings) to 32-bit values, for the
 * load generator's bookkeeping: which jobs a run created, and which
 * submission a finished job was.
 *
 * Open addressing with linear probing over slots that hold an index into
 * an array of keys; it grows at half full. Not thread-safe: one owner.
 */
#ifndef BERTH_BENCH_IDMAP_H
#define BERTH_BENCH_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IDMAP_KEY_MAX 48 /* a UUIDv7 (36 characters) and a NUL, with room */

struct idmap {
	char (*keys)[IDMAP_KEY_MAX];
	uint32_t *vals;
	uint32_t *slots; /* 0: empty, else 1 + an index into keys */
	size_t n, cap;   /* keys used and allocated; slots = 2 * cap */
};

/* idmap_put sets id to v (adding id, or replacing its value). Returns 0,
 * -ENOMEM, or -EINVAL for an id too long to be a job id. */
int idmap_put(struct idmap *m, const char *id, uint32_t v);

/* idmap_get returns true and *v when id is in the map. */
bool idmap_get(const struct idmap *m, const char *id, uint32_t *v);

void idmap_free(struct idmap *m);

#endif
