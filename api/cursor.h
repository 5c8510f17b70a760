/*
 * cursor.h: the cursors of tools/list and jobs/list, signed so that a
 * cursor berthd did not hand out is refused (-32602, docs/API.md) instead
 * of being read as a position.
 *
 * A cursor is "<kind><hex of the position>.<hex of a MAC>": the position
 * is what the listing goes on after (a tool's name; the store's own
 * cursor), and the MAC is HMAC-SHA-256, cut to 128 bits, of the kind and
 * the position under a key drawn from getrandom(2) once per process. So a
 * cursor of one listing is no cursor of the other, a changed or cut one
 * fails, and one from another berthd, or from this one before a restart,
 * is refused: the client starts its listing again. Positions are not
 * secret; the MAC only proves where a cursor came from.
 */
#ifndef BERTH_API_CURSOR_H
#define BERTH_API_CURSOR_H

/* Kinds of cursors, one per listing. */
enum {
	API_CURSOR_TOOLS = 't',
	API_CURSOR_JOBS = 'j',
};

/* api_cursor_make returns a new cursor (malloc'd) of kind that goes on
 * after position, or NULL when out of memory. */
char *api_cursor_make(int kind, const char *position);

/* api_cursor_open returns the position (malloc'd) of cursor when this
 * process made it for kind, else NULL (also when out of memory, which the
 * caller cannot tell from a forged cursor and need not). */
char *api_cursor_open(int kind, const char *cursor);

#endif
