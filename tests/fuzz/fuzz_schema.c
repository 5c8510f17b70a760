/*
 * fuzz_schema.c: the JSON Schema compiler and validator (schema/schema.h).
 *
 * The input is a schema document, a NUL byte, and an instance. A schema
 * that compiles is used to validate the instance both ways (the fast
 * schema_valid and the error-collecting schema_validate), which must agree.
 * Without a NUL byte the whole input is compiled as a schema and validated
 * against itself. Then the schema's defaults are filled into the instance
 * (schema_apply_defaults), which must leave the instance as it was, return
 * the instance itself for a schema without defaults, and give a value the
 * validator can take.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "schema/schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nul = memchr(data, '\0', size);
	size_t slen = nul ? (size_t)(nul - (const char *)data) : size;
	json_error_t e;
	json_t *doc, *inst;
	struct schema *s;
	char *err = NULL;
	json_t *errors = NULL, *filled, *before;
	int rc;
	bool ok;

	doc = json_loadb((const char *)data, slen, JSON_DECODE_ANY, &e);
	if (!doc)
		return 0;
	s = schema_compile(doc, NULL, NULL, &err);
	free(err);
	if (!s) {
		json_decref(doc);
		return 0;
	}
	inst = nul ? json_loadb(nul + 1, size - slen - 1, JSON_DECODE_ANY, &e)
		   : json_incref(doc);
	if (inst) {
		ok = schema_valid(s, inst);
		rc = schema_validate(s, inst, &errors);
		if (rc != -ENOMEM && ok != (rc == 0))
			abort(); /* the two paths disagree */
		if (rc == -EINVAL && json_array_size(errors) == 0)
			abort(); /* invalid without a reason */
		json_decref(errors);
		before = json_deep_copy(inst);
		filled = schema_apply_defaults(s, inst);
		if (filled && !schema_has_defaults(s) && filled != inst)
			abort(); /* a copy for nothing to fill */
		if (filled)
			(void)schema_valid(s, filled);
		if (before && !json_equal(before, inst))
			abort(); /* the instance was changed */
		json_decref(filled);
		json_decref(before);
		json_decref(inst);
	}
	schema_free(s);
	json_decref(doc);
	return 0;
}
