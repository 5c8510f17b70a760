/*
 * replay.c: a main for the fuzz targets when they are built without
 * libFuzzer (gcc): it runs every file of the directories (or files) named
 * on the command line through LLVMFuzzerTestOneInput once. The test suite
 * uses it to replay the seed corpus and every regression input under ASan
 * and UBSan in the ordinary build.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f) {
		perror(path);
		return -1;
	}
	do {
		if (len == cap) {
			uint8_t *nb;

			cap = cap ? cap * 2 : 4096;
			nb = realloc(buf, cap);
			if (!nb)
				abort();
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int runs = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *e;

		if (stat(argv[i], &st) != 0)
			continue; /* an absent regressions folder is fine */
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]) != 0)
				return 1;
			runs++;
			continue;
		}
		if (!(d = opendir(argv[i])))
			return 1;
		while ((e = readdir(d))) {
			char path[4096];

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
			if (run_file(path) != 0) {
				closedir(d);
				return 1;
			}
			runs++;
		}
		closedir(d);
	}
	printf("replayed %d inputs\n", runs);
	return 0;
}
