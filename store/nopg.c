/*
 * nopg.c: store_copy for a build without libpq, which has no PostgreSQL
 * backend to copy into.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

int store_copy(const char *from, const char *to, char **errmsg)
{
	(void)from;
	(void)to;
	if (errmsg)
		*errmsg = strdup("this berth was built without PostgreSQL "
				 "support (libpq), so it cannot copy a database "
				 "into one");
	return -ENOTSUP;
}
