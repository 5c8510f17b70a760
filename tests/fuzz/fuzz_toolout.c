/*
 * fuzz_toolout.c: the parser of an external tool's stdout lines
 * (worker__parse_line of worker/internal.h), the part of the process
 * protocol (worker/proc.c) that reads what a tool writes. Each input is
 * one line. A line that parses must give a result that holds together
 * (what has says is there, a final outcome of a known kind, an error
 * with a message); one that does not is refused with -EINVAL, a reason
 * and nothing else.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct worker__line l;
	int rc = worker__parse_line((const char *)data, size, &l);

	if (rc == 0) {
		if (!!(l.has & WORKER__LINE_PROGRESS) != !!l.progress)
			abort();
		if ((l.has & WORKER__LINE_PROGRESS) &&
		    !json_is_number(json_object_get(l.progress, "progress")))
			abort();
		if ((l.has & WORKER__LINE_LOG) &&
		    (!l.log_level || !l.log_message))
			abort();
		if (!!(l.has & WORKER__LINE_CHECKPOINT) != !!l.checkpoint)
			abort();
		if (l.has & WORKER__LINE_FINAL) {
			switch (l.final.kind) {
			case BERTH_OUTPUT:
			case BERTH_SUSPEND:
				if (!l.final.value)
					abort();
				break;
			case BERTH_ERROR:
				/* NULL only when out of memory */
				break;
			default:
				abort();
			}
		} else if (l.final.kind) {
			abort();
		}
		if (l.has && !l.obj)
			abort();
	} else if (rc != -EINVAL || l.has || l.obj || !l.why[0]) {
		abort();
	}
	worker__line_finish(&l);
	return 0;
}
