/*
 * cursor.c: signed listing cursors (cursor.h).
 */
#include "api/cursor.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "api/sha256.h"

/* The MAC's bytes kept in a cursor: 128 bits, far past guessing. */
#define MAC_BYTES 16
/* The longest position signed: a store cursor or a tool name is far
 * shorter. */
#define MAX_POSITION 1024

static unsigned char key[32];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* make_key draws the process's key from the kernel's CSPRNG: getrandom,
 * or the device where a seccomp filter or an old kernel refuses it. With
 * neither, the key stays zero and a forged cursor could pass, which gives
 * a client a listing from a position of its choosing: what it could read
 * anyway. */
static void make_key(void)
{
	size_t got = 0;
	int fd;

	while (got < sizeof key) {
		ssize_t n = getrandom(key + got, sizeof key - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof key &&
	    (fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) >= 0) {
		while (got < sizeof key) {
			ssize_t n = read(fd, key + got, sizeof key - got);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		close(fd);
	}
}

/* mac computes the MAC of kind and position (len bytes). */
static void mac(int kind, const char *position, size_t len,
		unsigned char out[API_SHA256_SIZE])
{
	char buf[1 + MAX_POSITION];

	pthread_once(&key_once, make_key);
	buf[0] = (char)kind;
	memcpy(buf + 1, position, len);
	api_hmac_sha256(key, sizeof key, buf, 1 + len, out);
}

static const char hex[] = "0123456789abcdef";

static void put_hex(char *out, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[p[i] >> 4];
		out[2 * i + 1] = hex[p[i] & 15];
	}
}

static int unhex(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
				      : -1;
}

/* get_hex decodes n bytes from 2n hex digits of s; false on a bad one. */
static bool get_hex(unsigned char *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi = unhex(s[2 * i]), lo = unhex(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return true;
}

char *api_cursor_make(int kind, const char *position)
{
	size_t len = strlen(position);
	unsigned char m[API_SHA256_SIZE];
	char *c;

	if (len > MAX_POSITION)
		return NULL;
	c = malloc(1 + 2 * len + 1 + 2 * MAC_BYTES + 1);
	if (!c)
		return NULL;
	mac(kind, position, len, m);
	c[0] = (char)kind;
	put_hex(c + 1, (const unsigned char *)position, len);
	c[1 + 2 * len] = '.';
	put_hex(c + 2 + 2 * len, m, MAC_BYTES);
	c[2 + 2 * len + 2 * MAC_BYTES] = '\0';
	return c;
}

char *api_cursor_open(int kind, const char *cursor)
{
	size_t n = cursor ? strlen(cursor) : 0, len;
	unsigned char m[API_SHA256_SIZE], given[MAC_BYTES], diff = 0;
	char *position;

	/* kind, 2 hex digits a byte, '.', the MAC. */
	if (n < 2 + 2 * MAC_BYTES || cursor[0] != (char)kind ||
	    (n - 2 - 2 * MAC_BYTES) % 2 != 0 ||
	    cursor[n - 2 * MAC_BYTES - 1] != '.')
		return NULL;
	len = (n - 2 - 2 * MAC_BYTES) / 2;
	if (len > MAX_POSITION || !get_hex(given, cursor + n - 2 * MAC_BYTES,
					   MAC_BYTES))
		return NULL;
	position = malloc(len + 1);
	if (!position)
		return NULL;
	if (!get_hex((unsigned char *)position, cursor + 1, len) ||
	    memchr(position, '\0', len)) {
		free(position);
		return NULL;
	}
	position[len] = '\0';
	mac(kind, position, len, m);
	/* In constant time: a difference anywhere costs the same. */
	for (size_t i = 0; i < MAC_BYTES; i++)
		diff |= (unsigned char)(m[i] ^ given[i]);
	if (diff) {
		free(position);
		return NULL;
	}
	return position;
}
