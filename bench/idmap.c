/*
 * idmap.c: an open-addressing map from job ids to 32-bit values.
 */
#include "idmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603u; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211u;
	return h;
}

/* find returns the slot of id, or the empty slot where it would go. */
static size_t find(const struct idmap *m, const char *id)
{
	size_t mask = 2 * m->cap - 1;
	size_t h = (size_t)hash(id) & mask;

	while (m->slots[h] && strcmp(m->keys[m->slots[h] - 1], id) != 0)
		h = (h + 1) & mask;
	return h;
}

/* grow doubles the map (or makes its first 32768 keys' room). */
static int grow(struct idmap *m)
{
	size_t cap = m->cap ? 2 * m->cap : 32768;
	char(*keys)[IDMAP_KEY_MAX] = realloc(m->keys, cap * sizeof *keys);
	uint32_t *vals, *slots;

	if (!keys)
		return -ENOMEM;
	m->keys = keys;
	vals = realloc(m->vals, cap * sizeof *vals);
	if (!vals)
		return -ENOMEM;
	m->vals = vals;
	slots = calloc(2 * cap, sizeof *slots);
	if (!slots)
		return -ENOMEM;
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	for (size_t i = 0; i < m->n; i++)
		m->slots[find(m, m->keys[i])] = (uint32_t)i + 1;
	return 0;
}

int idmap_put(struct idmap *m, const char *id, uint32_t v)
{
	size_t h;

	if (strlen(id) >= IDMAP_KEY_MAX)
		return -EINVAL;
	if (m->n == m->cap) {
		int rc = grow(m);

		if (rc)
			return rc;
	}
	h = find(m, id);
	if (m->slots[h]) {
		m->vals[m->slots[h] - 1] = v;
		return 0;
	}
	memcpy(m->keys[m->n], id, strlen(id) + 1);
	m->vals[m->n] = v;
	m->slots[h] = (uint32_t)++m->n;
	return 0;
}

bool idmap_get(const struct idmap *m, const char *id, uint32_t *v)
{
	size_t h;

	if (m->cap == 0)
		return false;
	h = find(m, id);
	if (!m->slots[h])
		return false;
	*v = m->vals[m->slots[h] - 1];
	return true;
}

void idmap_free(struct idmap *m)
{
	free(m->keys);
	free(m->vals);
	free(m->slots);
	memset(m, 0, sizeof *m);
}
