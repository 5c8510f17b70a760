/*
 * sha256.h: SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for the
 * cursors berthd signs (api/cursor.h).
 *
 * berth links no crypto library, and one hash for one purpose did not
 * justify adding libcrypto to every build and package: this is a small
 * implementation written from the standard, checked against its test
 * vectors and RFC 4231's (tests/api/test_cursor.c). It is not meant to be
 * fast, and it keeps no secret beyond the duration of a call.
 */
#ifndef BERTH_API_SHA256_H
#define BERTH_API_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define API_SHA256_SIZE 32

struct api_sha256 {
	uint32_t h[8];
	uint64_t len;       /* bytes hashed so far */
	unsigned char block[64];
	size_t used;        /* bytes of block filled */
};

void api_sha256_init(struct api_sha256 *s);
void api_sha256_update(struct api_sha256 *s, const void *data, size_t n);
/* api_sha256_final writes the digest and wipes s. */
void api_sha256_final(struct api_sha256 *s,
		      unsigned char out[API_SHA256_SIZE]);

/* api_sha256 hashes n bytes of data in one call. */
void api_sha256(const void *data, size_t n,
		unsigned char out[API_SHA256_SIZE]);

/* api_hmac_sha256 writes HMAC-SHA-256 of the message under key. */
void api_hmac_sha256(const void *key, size_t keylen, const void *msg,
		     size_t n, unsigned char out[API_SHA256_SIZE]);

#endif
