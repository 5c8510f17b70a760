/*
 * regex: "pattern", "patternProperties" and format "regex" on PCRE2.
 *
 * JSON Schema patterns are ECMAScript regular expressions.  PCRE2 is asked
 * to behave like ECMAScript where it can: "$" matches only at the very end
 * (no allowance for a final newline), "\u" escapes are JavaScript's, "[]"
 * and "[^]" are allowed, and a backreference to an unset group matches the
 * empty string.  Subjects are UTF-8 and patterns are compiled in UTF mode.
 */
#include "schema/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Limits of one match attempt (PCRE2 counts them afresh at each place in
 * the subject where a match may start): generous for any sane pattern,
 * small enough that a catastrophic pattern is given up in milliseconds.
 * A match past them has no answer, and the validation stops with an error
 * saying so (validate.c): taking it for "does not match" would be a pass
 * under "not". */
#define MATCH_LIMIT 1000000
/* No depth limit of its own: PCRE2 keeps a frame for each repeat of a
 * group that it may backtrack into, so a depth limit caps how often a
 * group repeats, not how much is backtracked (10,000 refused a valid list
 * of 5,000 ids under "^[a-z]+(,[a-z]+)*$", or 30 KB of Zod's base64
 * pattern). The frames live on PCRE2's heap, which this bounds: about
 * half a million repeats. */
#define HEAP_LIMIT_KIB 65536

/*
 * What a match costs the run (struct schema__run), in steps.  PCRE2's own
 * limits bound neither the time of one pcre2_match nor that of many: they
 * apply to each start position afresh, so an unanchored pattern may take
 * its match limit again at every character ("(a|a){0,18}!"), and a run of
 * a character class is scanned without counting, so "\w+\s+\w+" on a
 * megabyte of letters is quadratic (minutes) within any limit.  So
 * patterns are compiled with PCRE2_AUTO_CALLOUT, which calls count before
 * every item of the pattern the matcher tries, at every start position and
 * after every backtrack, and count charges a step for each call and one
 * for every BYTES_PER_STEP bytes the match moved through the subject since
 * the call before (each way: a scan forward, then back to retry).  A step
 * is then about as long as one evaluation of a subschema.  An e-mail or
 * UUID pattern costs about 12 steps, 60 ns more than without callouts;
 * when the run has no steps left, count stops the match.
 */
#define BYTES_PER_STEP 32

/* ECMAScript spells Unicode general categories out ("\\p{Letter}"); PCRE2
 * before 10.43 knows only the short names, so the long ones are rewritten. */
static const char *const categories[][2] = {
	{ "Letter", "L" }, { "Cased_Letter", "L&" }, { "Uppercase_Letter", "Lu" },
	{ "Lowercase_Letter", "Ll" }, { "Titlecase_Letter", "Lt" },
	{ "Modifier_Letter", "Lm" }, { "Other_Letter", "Lo" }, { "Mark", "M" },
	{ "Nonspacing_Mark", "Mn" }, { "Spacing_Mark", "Mc" },
	{ "Enclosing_Mark", "Me" }, { "Number", "N" }, { "Decimal_Number", "Nd" },
	{ "digit", "Nd" }, { "Letter_Number", "Nl" }, { "Other_Number", "No" },
	{ "Punctuation", "P" }, { "punct", "P" }, { "Connector_Punctuation", "Pc" },
	{ "Dash_Punctuation", "Pd" }, { "Open_Punctuation", "Ps" },
	{ "Close_Punctuation", "Pe" }, { "Initial_Punctuation", "Pi" },
	{ "Final_Punctuation", "Pf" }, { "Other_Punctuation", "Po" },
	{ "Symbol", "S" }, { "Math_Symbol", "Sm" }, { "Currency_Symbol", "Sc" },
	{ "Modifier_Symbol", "Sk" }, { "Other_Symbol", "So" },
	{ "Separator", "Z" }, { "Space_Separator", "Zs" },
	{ "Line_Separator", "Zl" }, { "Paragraph_Separator", "Zp" },
	{ "Other", "C" }, { "Control", "Cc" }, { "cntrl", "Cc" }, { "Format", "Cf" },
	{ "Surrogate", "Cs" }, { "Private_Use", "Co" }, { "Unassigned", "Cn" },
};

/* translate copies source to out (at least len + 1 bytes), rewriting long
 * category names; a rewrite never makes the pattern longer. */
static size_t translate(const char *source, size_t len, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < len;) {
		if (source[i] == '\\' && i + 2 < len &&
		    (source[i + 1] == 'p' || source[i + 1] == 'P') && source[i + 2] == '{') {
			const char *name = source + i + 3, *close;
			size_t n;

			close = memchr(name, '}', len - (i + 3));
			if (close) {
				n = (size_t)(close - name);
				if (n > 17 && strncmp(name, "General_Category=", 17) == 0) {
					name += 17;
					n -= 17;
				} else if (n > 3 && strncmp(name, "gc=", 3) == 0) {
					name += 3;
					n -= 3;
				}
				for (size_t k = 0; k < sizeof(categories) / sizeof(categories[0]); k++)
					if (strlen(categories[k][0]) == n &&
					    strncmp(categories[k][0], name, n) == 0) {
						o += (size_t)sprintf(out + o, "\\%c{%s}",
								     source[i + 1], categories[k][1]);
						i = (size_t)(close - source) + 1;
						goto next;
					}
			}
		}
		if (source[i] == '\\' && i + 1 < len)
			out[o++] = source[i++];
		out[o++] = source[i++];
next:;
	}
	out[o] = '\0';
	return o;
}

pcre2_code *schema__regex_compile(const char *source, size_t len, char *err,
				  size_t errlen)
{
	pcre2_compile_context *cctx = pcre2_compile_context_create(NULL);
	pcre2_code *re;
	int code;
	PCRE2_SIZE offset;
	PCRE2_UCHAR buf[200];

	if (!cctx) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
#ifdef PCRE2_EXTRA_ALT_BSUX
	pcre2_set_compile_extra_options(cctx, PCRE2_EXTRA_ALT_BSUX);
#endif
	char *translated = malloc(len + 1);

	if (!translated) {
		pcre2_compile_context_free(cctx);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	re = pcre2_compile((PCRE2_SPTR)translated, translate(source, len, translated),
			   PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_DOLLAR_ENDONLY |
				   PCRE2_ALLOW_EMPTY_CLASS | PCRE2_MATCH_UNSET_BACKREF |
				   PCRE2_AUTO_CALLOUT,
			   &code, &offset, cctx);
	pcre2_compile_context_free(cctx);
	free(translated);
	if (!re) {
		pcre2_get_error_message(code, buf, sizeof(buf));
		snprintf(err, errlen, "%s at offset %zu", (char *)buf, (size_t)offset);
	}
	return re;
}

/* A match in progress, for count. */
struct counter {
	struct schema__run *run;
	PCRE2_SIZE last; /* where the subject was at the call before */
};

static int count(pcre2_callout_block *cb, void *data)
{
	struct counter *k = data;
	PCRE2_SIZE at = cb->current_position;
	PCRE2_SIZE moved = at > k->last ? at - k->last : k->last - at;

	k->last = at;
	k->run->steps -= 1 + (long long)(moved / BYTES_PER_STEP);
	return k->run->steps < 0 ? PCRE2_ERROR_CALLOUT : 0;
}

int schema__regex_match(struct schema__run *run, const pcre2_code *re,
			const char *subject, size_t len)
{
	struct counter k = { run, 0 };
	int rc;

	if (!run->md) {
		run->mctx = pcre2_match_context_create(NULL);
		/* One pair of offsets is enough: only whether it matched
		 * matters (a too-small vector makes pcre2_match return 0,
		 * which is a match). */
		run->md = pcre2_match_data_create(1, NULL);
		if (!run->mctx || !run->md)
			return SCHEMA__RE_NOMEM;
		pcre2_set_match_limit(run->mctx, MATCH_LIMIT);
		pcre2_set_heap_limit(run->mctx, HEAP_LIMIT_KIB);
	}
	/* The start of a match may scan the whole subject for a character
	 * the pattern needs, before any callout. */
	run->steps -= 1 + (long long)(len / BYTES_PER_STEP);
	if (run->steps < 0)
		return SCHEMA__RE_OUT_OF_STEPS;
	pcre2_set_callout(run->mctx, count, &k);
	rc = pcre2_match(re, (PCRE2_SPTR)subject, len, 0, 0, run->md, run->mctx);
	if (rc >= 0)
		return SCHEMA__RE_MATCH;
	switch (rc) {
	case PCRE2_ERROR_NOMATCH:
		return SCHEMA__RE_NO_MATCH;
	case PCRE2_ERROR_CALLOUT:
		return SCHEMA__RE_OUT_OF_STEPS;
	case PCRE2_ERROR_NOMEMORY:
		return SCHEMA__RE_NOMEM;
	case PCRE2_ERROR_HEAPLIMIT:
	case PCRE2_ERROR_DEPTHLIMIT:
		return SCHEMA__RE_TOO_LONG;
	default:
		return SCHEMA__RE_GAVE_UP;
	}
}
