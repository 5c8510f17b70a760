/*
 * test_backoff.c: the delay between tries.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include "worker/internal.h"

static void backoff__doubles_with_each_try(void **state)
{
	/* r = 0: the fixed half only. */
	assert_int_equal(worker__backoff_ms(1, 1000, 300000, 0), 500);
	assert_int_equal(worker__backoff_ms(2, 1000, 300000, 0), 1000);
	assert_int_equal(worker__backoff_ms(3, 1000, 300000, 0), 2000);
	assert_int_equal(worker__backoff_ms(4, 1000, 300000, 0), 4000);
}

static void backoff__never_exceeds_its_maximum(void **state)
{
	assert_int_equal(worker__backoff_ms(30, 1000, 60000, 0.999999), 59999);
	assert_true(worker__backoff_ms(1000000, 1000, 60000, 0.5) <= 60000);
	assert_true(worker__backoff_ms(64, 1, INT64_MAX / 4, 0.5) > 0);
}

static void backoff__jitter_stays_within_the_upper_half(void **state)
{
	for (int i = 0; i < 1000; i++) {
		double r = worker__random();
		int64_t d = worker__backoff_ms(3, 1000, 300000, r);

		assert_true(r >= 0 && r < 1);
		assert_true(d >= 2000 && d < 4000);
	}
}

static void backoff__uses_defaults_for_zero(void **state)
{
	assert_int_equal(worker__backoff_ms(1, 0, 0, 0), 500);
	assert_int_equal(worker__backoff_ms(0, 0, 0, 0), 500);
	assert_int_equal(worker__backoff_ms(100, 0, 0, 0), 150000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(backoff__doubles_with_each_try),
		cmocka_unit_test(backoff__never_exceeds_its_maximum),
		cmocka_unit_test(backoff__jitter_stays_within_the_upper_half),
		cmocka_unit_test(backoff__uses_defaults_for_zero),
	};

	return cmocka_run_group_tests_name("worker backoff", tests, NULL,
					   NULL);
}
