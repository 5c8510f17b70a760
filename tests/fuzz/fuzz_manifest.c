/*
 * fuzz_manifest.c: the external tool manifest loader
 * (worker__manifest_load of worker/internal.h). Each input is written to a
 * manifest file in a private directory and loaded; a manifest that loads
 * is freed again, one that fails must say why.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[256];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct worker_tool *t = NULL;
	char *err = NULL;
	FILE *f;
	int rc;

	if (!path[0]) {
		char dir[] = "/tmp/berth-fuzz-manifest-XXXXXX";

		if (!mkdtemp(dir))
			abort();
		snprintf(path, sizeof path, "%s/tool.json", dir);
	}
	f = fopen(path, "wb");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	rc = worker__manifest_load(path, &t, &err);
	if (rc == 0) {
		if (!t)
			abort();
		worker__tool_free(t);
	} else if (!err && rc != -ENOMEM) {
		abort(); /* a refusal must say why */
	}
	free(err);
	return 0;
}
