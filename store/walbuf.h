/*
 * walbuf.h: a SQLite VFS that gathers a transaction's writes to the WAL
 * into one write(2).
 *
 * SQLite appends a commit's pages to the WAL as two writes each, the
 * frame's 24-byte header and then the page, so a commit of ten pages is
 * twenty pwrite64 calls before its fdatasync (docs/BENCHMARKS.md, "The
 * WAL's writes"). This VFS sits over another (the default: "unix") and
 * keeps the writes to a WAL file that follow one another in a buffer of
 * its own; it hands them to the VFS below as one write when SQLite syncs,
 * reads, sizes, truncates or closes the file, when a write does not follow
 * the last one, or when the buffer is full. Every other file, and every
 * other call, goes straight to the VFS below.
 *
 * What reaches the file, and its order, are unchanged; only when it gets
 * there moves, and never past a sync. That is safe only for a connection
 * that syncs the WAL at every commit, synchronous = FULL: SQLite makes a
 * commit visible to other connections (in the WAL index, shared memory)
 * after that sync, so a reader on its own descriptor never looks for a
 * frame that is still in the buffer. Under synchronous = NORMAL nothing
 * would send the buffer before the commit is visible: store_open uses this
 * VFS only for the writer's connection with durability full. Nor would it
 * on a device without "powersafe overwrite", where SQLite writes the end
 * of a commit's last frame after its sync: such a WAL is written through.
 *
 * One case moves more than the time: a transaction that spilled pages to
 * the WAL before its commit (more than the writer's 32 MiB cache) and then
 * rolled back leaves them in the buffer, and they reach the file with the
 * next write, after SQLite released its write lock. In this process that
 * is harmless (SQLite's own VFS wrote them too, and the next transaction
 * writes over them), but another process writing the database in between
 * would have its frames overwritten. Nothing but berthd may write its
 * database while it runs (store__lock keeps out a second berthd).
 */
#ifndef BERTH_STORE_WALBUF_H
#define BERTH_STORE_WALBUF_H

/* STORE__WALBUF_MAX is the most a WAL file's buffer holds (1 MiB): a commit
 * larger than that goes down each time the buffer fills. A commit at
 * berth's batch sizes is tens of KiB. The buffer goes down in writes of at
 * most 64 KiB (walbuf.c says why). */
#define STORE__WALBUF_MAX (1u << 20)

/*
 * store__walbuf_register registers a VFS named name over the VFS named
 * below (NULL: SQLite's default), not as the default, once per name: a
 * second call with a registered name returns 0 and changes nothing.
 * Returns 0, or -ENOENT when below is not registered, -ENOMEM.
 * Thread-safe. The VFS lives until the process ends.
 */
int store__walbuf_register(const char *name, const char *below);

/* store__walbuf_vfs registers (once) the VFS "berth-walbuf" over SQLite's
 * default and returns its name for sqlite3_open_v2, or NULL when it could
 * not (the caller then opens without it). Thread-safe. */
const char *store__walbuf_vfs(void);

#endif
