/*
 * test_cursor.c: SHA-256 and HMAC-SHA-256 against their published test
 * vectors (FIPS 180-4's examples, RFC 4231), and the signed cursors of
 * tools/list and jobs/list built on them (api/cursor.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/cursor.h"
#include "api/sha256.h"

static void hex_of(const unsigned char *d, char out[2 * API_SHA256_SIZE + 1])
{
	for (int i = 0; i < API_SHA256_SIZE; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void assert_sha256(const void *data, size_t n, const char *want)
{
	unsigned char d[API_SHA256_SIZE];
	char got[2 * API_SHA256_SIZE + 1];

	api_sha256(data, n, d);
	hex_of(d, got);
	assert_string_equal(got, want);
}

static void assert_hmac(const void *key, size_t keylen, const void *msg,
			size_t n, const char *want)
{
	unsigned char d[API_SHA256_SIZE];
	char got[2 * API_SHA256_SIZE + 1];

	api_hmac_sha256(key, keylen, msg, n, d);
	hex_of(d, got);
	assert_string_equal(got, want);
}

static void sha256__matches_the_published_vectors(void **state)
{
	static const char two_blocks[] =
		"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
		"hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
	char *million = malloc(1000000);

	assert_sha256("", 0, "e3b0c44298fc1c149afbf4c8996fb924"
			     "27ae41e4649b934ca495991b7852b855");
	assert_sha256("abc", 3, "ba7816bf8f01cfea414140de5dae2223"
				"b00361a396177a9cb410ff61f20015ad");
	assert_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		      56, "248d6a61d20638b8e5c026930c3e6039"
			  "a33ce45964ff2167f6ecedd419db06c1");
	assert_sha256(two_blocks, strlen(two_blocks),
		      "cf5b16a778af8380036ce59e7b049237"
		      "0b249b11e8f07a51afac45037afee9d1");
	assert_non_null(million);
	memset(million, 'a', 1000000);
	assert_sha256(million, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67"
					"f1809a48a497200e046d39ccc7112cd0");
	free(million);
}

static void sha256__pads_at_every_edge_of_a_block(void **state)
{
	char x[64];
	struct api_sha256 s;
	unsigned char d[API_SHA256_SIZE];
	char got[2 * API_SHA256_SIZE + 1];

	memset(x, 'x', sizeof x);
	/* 55 bytes leave room for the length; 56 do not; 64 fill it. */
	assert_sha256(x, 55, "d5e285683cd4efc02d021a5c62014694"
			     "958901005d6f71e89e0989fac77e4072");
	assert_sha256(x, 56, "04c26261370ee7541549d16dee320c72"
			     "3e3fd14671e66a099afe0a377c16888e");
	assert_sha256(x, 64, "7ce100971f64e7001e8fe5a51973ecdf"
			     "e1ced42befe7ee8d5fd6219506b5393c");
	/* Fed a byte at a time, the same. */
	api_sha256_init(&s);
	for (int i = 0; i < 56; i++)
		api_sha256_update(&s, "x", 1);
	api_sha256_final(&s, d);
	hex_of(d, got);
	assert_string_equal(got, "04c26261370ee7541549d16dee320c72"
				 "3e3fd14671e66a099afe0a377c16888e");
}

static void hmac_sha256__matches_rfc_4231(void **state)
{
	unsigned char k[131], m[50];

	/* Test cases 1 to 4, 6 and 7 (5 is a truncated MAC). */
	memset(k, 0x0b, 20);
	assert_hmac(k, 20, "Hi There", 8,
		    "b0344c61d8db38535ca8afceaf0bf12b"
		    "881dc200c9833da726e9376c2e32cff7");
	assert_hmac("Jefe", 4, "what do ya want for nothing?", 28,
		    "5bdcc146bf60754e6a042426089575c7"
		    "5a003f089d2739839dec58b964ec3843");
	memset(k, 0xaa, 20);
	memset(m, 0xdd, 50);
	assert_hmac(k, 20, m, 50, "773ea91e36800e46854db8ebd09181a7"
				  "2959098b3ef8c122d9635514ced565fe");
	for (int i = 0; i < 25; i++)
		k[i] = (unsigned char)(i + 1);
	memset(m, 0xcd, 50);
	assert_hmac(k, 25, m, 50, "82558a389a443c0ea4cc819899f2083a"
				  "85f0faa3e578f8077a2e3ff46729665b");
	memset(k, 0xaa, 131);
	assert_hmac(k, 131, "Test Using Larger Than Block-Size Key - Hash Key "
		    "First", 54,
		    "60e431591ee0b67f0d8a26aacbf5b77f"
		    "8e0bc6213728c5140546040f0ee37f54");
	assert_hmac(k, 131,
		    "This is a test using a larger than block-size key and a "
		    "larger than block-size data. The key needs to be hashed "
		    "before being used by the HMAC algorithm.", 152,
		    "9b09ffa71b942fcb27635fbcd5b0e944"
		    "bfdc63644f0713938a7f51535c3a35e2");
}

static void a_cursor__opens_to_its_position(void **state)
{
	char *c = api_cursor_make(API_CURSOR_JOBS, "c130313233");
	char *p = api_cursor_open(API_CURSOR_JOBS, c);

	assert_non_null(p);
	assert_string_equal(p, "c130313233");
	free(p);
	free(c);
	/* An empty position too: the page before the first. */
	c = api_cursor_make(API_CURSOR_TOOLS, "");
	p = api_cursor_open(API_CURSOR_TOOLS, c);
	assert_non_null(p);
	assert_string_equal(p, "");
	free(p);
	free(c);
}

static void a_cursor_of_the_other_listing__is_refused(void **state)
{
	char *c = api_cursor_make(API_CURSOR_TOOLS, "noop");

	assert_null(api_cursor_open(API_CURSOR_JOBS, c));
	/* Even with its kind letter changed: the MAC covers the kind. */
	c[0] = (char)API_CURSOR_JOBS;
	assert_null(api_cursor_open(API_CURSOR_JOBS, c));
	free(c);
}

static void a_changed_cut_or_made_up_cursor__is_refused(void **state)
{
	char *c = api_cursor_make(API_CURSOR_TOOLS, "weather-tool");
	size_t n = strlen(c);
	char *bad = malloc(n + 8);

	assert_non_null(bad);
	/* Any one character changed, wherever it is. */
	for (size_t i = 0; i < n; i++) {
		memcpy(bad, c, n + 1);
		bad[i] = bad[i] == '0' ? '1' : '0';
		assert_null(api_cursor_open(API_CURSOR_TOOLS, bad));
	}
	/* Cut at every length, or with more after it. */
	for (size_t len = 0; len < n; len++) {
		memcpy(bad, c, len);
		bad[len] = '\0';
		assert_null(api_cursor_open(API_CURSOR_TOOLS, bad));
	}
	snprintf(bad, n + 8, "%s00", c);
	assert_null(api_cursor_open(API_CURSOR_TOOLS, bad));
	/* Upper-case hex is not what was given out. */
	memcpy(bad, c, n + 1);
	for (size_t i = 1; i < n; i++)
		if (bad[i] >= 'a' && bad[i] <= 'f')
			bad[i] = (char)(bad[i] - 'a' + 'A');
	assert_null(api_cursor_open(API_CURSOR_TOOLS, bad));
	/* The forms berthd accepted before cursors were signed. */
	assert_null(api_cursor_open(API_CURSOR_TOOLS, "weather-tool"));
	assert_null(api_cursor_open(API_CURSOR_JOBS,
				    "c130313961323331342d"));
	assert_null(api_cursor_open(API_CURSOR_JOBS, NULL));
	/* A position with a NUL byte inside, MAC or not. */
	assert_null(api_cursor_open(API_CURSOR_TOOLS,
				    "t6100.00000000000000000000000000000000"));
	free(bad);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sha256__matches_the_published_vectors),
		cmocka_unit_test(sha256__pads_at_every_edge_of_a_block),
		cmocka_unit_test(hmac_sha256__matches_rfc_4231),
		cmocka_unit_test(a_cursor__opens_to_its_position),
		cmocka_unit_test(a_cursor_of_the_other_listing__is_refused),
		cmocka_unit_test(a_changed_cut_or_made_up_cursor__is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
