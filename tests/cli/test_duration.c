/*
 * test_duration.c: the duration syntax berthd's options and the berth
 * command share (common/duration.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/duration.h"

/* ms_of parses s and returns its milliseconds, failing the test when s is
 * refused. */
static int64_t ms_of(const char *s)
{
	int64_t ms = -7;

	if (berth_parse_duration(s, &ms) != 0)
		fail_msg("'%s' was refused", s);
	return ms;
}

static void refused(const char *s)
{
	int64_t ms = -7;

	if (berth_parse_duration(s, &ms) == 0)
		fail_msg("'%s' was taken as %lld ms", s, (long long)ms);
	assert_int_equal(ms, -7); /* left alone */
}

static void bare_numbers__stay_milliseconds(void **state)
{
	assert_int_equal(ms_of("0"), 0);
	assert_int_equal(ms_of("250"), 250);
	assert_int_equal(ms_of("604800000"), 604800000);
}

static void every_unit__scales_to_milliseconds(void **state)
{
	assert_int_equal(ms_of("500ms"), 500);
	assert_int_equal(ms_of("30s"), 30000);
	assert_int_equal(ms_of("5m"), 300000);
	assert_int_equal(ms_of("1h"), 3600000);
	assert_int_equal(ms_of("7d"), 604800000);
}

static void fractions__count_down_to_the_millisecond(void **state)
{
	assert_int_equal(ms_of("1.5s"), 1500);
	assert_int_equal(ms_of(".25s"), 250);
	assert_int_equal(ms_of("0.5ms"), 0);
	assert_int_equal(ms_of("2.5"), 2);
	assert_int_equal(ms_of("1.0000000000001h"), 3600000);
	assert_int_equal(ms_of("0.001s"), 1);
}

static void anything_else__is_refused(void **state)
{
	static const char *const bad[] = {
		"", "s", ".", "-1", "+1", " 5s", "5s ", "5 s", "1e3", "5S",
		"5sec", "5x", "inf", "nan", "0x10", "1.5.5s", "5ms5",
	};

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		refused(bad[i]);
}

static void the_longest_duration__is_about_139_years(void **state)
{
	assert_int_equal(ms_of("4398046511104"), BERTH_DURATION_MAX);
	refused("4398046511105");
	assert_int_equal(ms_of("50903d"), 50903LL * 86400000);
	refused("50904d");
	refused("99999999999999999999999999d");
	refused("184467440737095516160");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bare_numbers__stay_milliseconds),
		cmocka_unit_test(every_unit__scales_to_milliseconds),
		cmocka_unit_test(fractions__count_down_to_the_millisecond),
		cmocka_unit_test(anything_else__is_refused),
		cmocka_unit_test(the_longest_duration__is_about_139_years),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
