/*
 * walbuf.c: a SQLite VFS that gathers a transaction's writes to the WAL
 * into one write (walbuf.h says why, and when it is safe).
 *
 * The layering is SQLite's own "VFS shim" (its test_vfstrace.c and
 * multiplexor are the same shape): a struct sqlite3_vfs whose pAppData is
 * the VFS below, and whose methods hand every call down. A file that is
 * not a WAL is opened by the VFS below straight into the memory SQLite
 * gave us and keeps that VFS's methods, so it costs nothing. A WAL file is
 * a struct wal_file, with the file of the VFS below after it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "store/walbuf.h"

/*
 * struct wal_file is a WAL file: SQLite's handle, the same file as the VFS
 * below opened it (in the memory after this struct), and the writes not
 * yet handed down: len bytes in buf, which belong at offset off.
 */
struct wal_file {
	sqlite3_file base; /* pMethods: &wal_methods */
	sqlite3_file *below;
	unsigned char *buf;
	size_t len, cap;
	sqlite3_int64 off;
	bool gather; /* false: every write goes straight down (see vfs_open) */
};

/* The memory after struct wal_file starts 8-aligned, as the VFS below's
 * file expects of the memory SQLite gives it. */
#define WAL_FILE_SIZE ((sizeof(struct wal_file) + 7) & ~(size_t)7)

static sqlite3_vfs *below_of(sqlite3_vfs *vfs)
{
	return vfs->pAppData;
}

/*
 * WAL_PIECE is the most flush hands down in one write. SQLite's unix VFS
 * writes at most 128 KiB - 1 bytes a call (seekAndWriteFd masks the length
 * with 0x1ffff, so that 128 KiB would be written as nothing and reported
 * as a full disk): pieces of 64 KiB, 16 pages, stay well inside that.
 */
#define WAL_PIECE (64 * 1024)

/* flush hands the buffered writes down, in pieces of at most WAL_PIECE.
 * On failure they are dropped and the transaction that made them must
 * fail: SQLite never reads a frame past the last commit that synced.
 * Returns a SQLite code, the VFS below's (see flush_io). */
static int flush(struct wal_file *f)
{
	int rc = SQLITE_OK;
	for (size_t at = 0; at < f->len && rc == SQLITE_OK; at += WAL_PIECE) {
		size_t n = f->len - at < WAL_PIECE ? f->len - at : WAL_PIECE;
		rc = f->below->pMethods->xWrite(f->below, f->buf + at, (int)n,
						f->off + (sqlite3_int64)at);
	}
	f->len = 0;
	return rc;
}

/*
 * flush_io is flush for the calls that are not writes or syncs (a read, a
 * size, a truncation, a file control): a failure there is reported as
 * SQLITE_IOERR_WRITE, whatever the VFS below said. SQLite rolls back the
 * whole transaction on an I/O error, but on SQLITE_FULL from a statement
 * with a statement journal only that statement (vdbeaux.c,
 * sqlite3VdbeHalt), and from a read the pager does not enter its error
 * state: frames an earlier statement spilled, dropped here, would then be
 * missing from a transaction that goes on to commit. A write or a sync
 * that fails makes the pager's error state itself, whatever the code.
 */
static int flush_io(struct wal_file *f)
{
	int rc = flush(f);
	return rc == SQLITE_OK ? rc : SQLITE_IOERR_WRITE;
}

static int wal_close(sqlite3_file *file)
{
	struct wal_file *f = (struct wal_file *)file;
	int rc = flush(f);
	int rc2 = f->below->pMethods->xClose(f->below);
	free(f->buf);
	f->buf = NULL;
	f->cap = 0;
	return rc != SQLITE_OK ? rc : rc2;
}

static int wal_read(sqlite3_file *file, void *out, int amt, sqlite3_int64 off)
{
	struct wal_file *f = (struct wal_file *)file;
	int rc = flush_io(f);
	return rc != SQLITE_OK ? rc
			       : f->below->pMethods->xRead(f->below, out, amt, off);
}

/* wal_write keeps a write that follows the buffered ones (or starts an
 * empty buffer) and hands down whatever else: the buffer first, so the
 * file sees every write in SQLite's order. */
static int wal_write(sqlite3_file *file, const void *data, int amt,
		     sqlite3_int64 off)
{
	struct wal_file *f = (struct wal_file *)file;
	size_t n = (size_t)amt;
	if (!f->gather)
		return f->below->pMethods->xWrite(f->below, data, amt, off);
	if (f->len > 0 && (off != f->off + (sqlite3_int64)f->len ||
			   f->len + n > STORE__WALBUF_MAX || n > WAL_PIECE)) {
		int rc = flush(f);
		if (rc != SQLITE_OK)
			return rc;
	}
	/* SQLite writes at most a page (64 KiB) at a time; anything larger
	 * goes down as it came, after what was buffered. */
	if (n > WAL_PIECE)
		return f->below->pMethods->xWrite(f->below, data, amt, off);
	if (f->len + n > f->cap) {
		size_t cap = f->cap ? f->cap : 64 * 1024;
		while (cap < f->len + n)
			cap *= 2;
		if (cap > STORE__WALBUF_MAX)
			cap = STORE__WALBUF_MAX;
		unsigned char *buf = realloc(f->buf, cap);
		if (buf == NULL) {
			/* No room to gather: write through, in order. */
			int rc = flush(f);
			return rc != SQLITE_OK
				       ? rc
				       : f->below->pMethods->xWrite(f->below, data,
								    amt, off);
		}
		f->buf = buf;
		f->cap = cap;
	}
	if (f->len == 0)
		f->off = off;
	memcpy(f->buf + f->len, data, n);
	f->len += n;
	return SQLITE_OK;
}

static int wal_truncate(sqlite3_file *file, sqlite3_int64 size)
{
	struct wal_file *f = (struct wal_file *)file;
	int rc = flush_io(f);
	return rc != SQLITE_OK ? rc
			       : f->below->pMethods->xTruncate(f->below, size);
}

static int wal_sync(sqlite3_file *file, int flags)
{
	struct wal_file *f = (struct wal_file *)file;
	int rc = flush(f);
	return rc != SQLITE_OK ? rc : f->below->pMethods->xSync(f->below, flags);
}

static int wal_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
	struct wal_file *f = (struct wal_file *)file;
	int rc = flush_io(f);
	return rc != SQLITE_OK ? rc
			       : f->below->pMethods->xFileSize(f->below, size);
}

static int wal_lock(sqlite3_file *file, int level)
{
	struct wal_file *f = (struct wal_file *)file;
	return f->below->pMethods->xLock(f->below, level);
}

static int wal_unlock(sqlite3_file *file, int level)
{
	struct wal_file *f = (struct wal_file *)file;
	return f->below->pMethods->xUnlock(f->below, level);
}

static int wal_check_reserved(sqlite3_file *file, int *out)
{
	struct wal_file *f = (struct wal_file *)file;
	return f->below->pMethods->xCheckReservedLock(f->below, out);
}

/* wal_file_control hands the buffer down first: a control may size,
 * truncate or otherwise look at the file. None is on a commit's path. */
static int wal_file_control(sqlite3_file *file, int op, void *arg)
{
	struct wal_file *f = (struct wal_file *)file;
	int rc = flush_io(f);
	if (rc != SQLITE_OK)
		return rc;
	return f->below->pMethods->xFileControl(f->below, op, arg);
}

static int wal_sector_size(sqlite3_file *file)
{
	struct wal_file *f = (struct wal_file *)file;
	return f->below->pMethods->xSectorSize(f->below);
}

static int wal_device_characteristics(sqlite3_file *file)
{
	struct wal_file *f = (struct wal_file *)file;
	return f->below->pMethods->xDeviceCharacteristics(f->below);
}

/* SQLite asks shared memory and memory maps of the database file, never
 * of its WAL; these hand down whatever comes, should it ever. */
static int wal_shm_map(sqlite3_file *file, int pg, int pgsz, int extend,
		       void volatile **pp)
{
	struct wal_file *f = (struct wal_file *)file;
	return f->below->pMethods->xShmMap(f->below, pg, pgsz, extend, pp);
}

static int wal_shm_lock(sqlite3_file *file, int offset, int n, int flags)
{
	struct wal_file *f = (struct wal_file *)file;
	return f->below->pMethods->xShmLock(f->below, offset, n, flags);
}

static void wal_shm_barrier(sqlite3_file *file)
{
	struct wal_file *f = (struct wal_file *)file;
	f->below->pMethods->xShmBarrier(f->below);
}

static int wal_shm_unmap(sqlite3_file *file, int delete_flag)
{
	struct wal_file *f = (struct wal_file *)file;
	return f->below->pMethods->xShmUnmap(f->below, delete_flag);
}

static int wal_fetch(sqlite3_file *file, sqlite3_int64 off, int amt, void **pp)
{
	struct wal_file *f = (struct wal_file *)file;
	int rc = flush_io(f);
	return rc != SQLITE_OK
		       ? rc
		       : f->below->pMethods->xFetch(f->below, off, amt, pp);
}

static int wal_unfetch(sqlite3_file *file, sqlite3_int64 off, void *p)
{
	struct wal_file *f = (struct wal_file *)file;
	return f->below->pMethods->xUnfetch(f->below, off, p);
}

/* wal_methods is the table of a WAL file; its iVersion is lowered to the
 * below file's at open, so that SQLite never calls a method the file
 * below lacks. One table per iVersion. */
static const sqlite3_io_methods wal_methods[3] = {
#define WAL_METHODS(v)                                                         \
	{                                                                      \
		.iVersion = (v),                                               \
		.xClose = wal_close,                                           \
		.xRead = wal_read,                                             \
		.xWrite = wal_write,                                           \
		.xTruncate = wal_truncate,                                     \
		.xSync = wal_sync,                                             \
		.xFileSize = wal_file_size,                                    \
		.xLock = wal_lock,                                             \
		.xUnlock = wal_unlock,                                         \
		.xCheckReservedLock = wal_check_reserved,                      \
		.xFileControl = wal_file_control,                              \
		.xSectorSize = wal_sector_size,                                \
		.xDeviceCharacteristics = wal_device_characteristics,          \
		.xShmMap = (v) >= 2 ? wal_shm_map : NULL,                      \
		.xShmLock = (v) >= 2 ? wal_shm_lock : NULL,                    \
		.xShmBarrier = (v) >= 2 ? wal_shm_barrier : NULL,              \
		.xShmUnmap = (v) >= 2 ? wal_shm_unmap : NULL,                  \
		.xFetch = (v) >= 3 ? wal_fetch : NULL,                         \
		.xUnfetch = (v) >= 3 ? wal_unfetch : NULL,                     \
	}
	WAL_METHODS(1),
	WAL_METHODS(2),
	WAL_METHODS(3),
#undef WAL_METHODS
};

static int vfs_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file,
		    int flags, int *out_flags)
{
	sqlite3_vfs *below = below_of(vfs);
	if (!(flags & SQLITE_OPEN_WAL))
		return below->xOpen(below, name, file, flags, out_flags);

	struct wal_file *f = (struct wal_file *)file;
	memset(f, 0, sizeof(*f));
	f->below = (sqlite3_file *)((char *)file + WAL_FILE_SIZE);
	int rc = below->xOpen(below, name, f->below, flags, out_flags);
	/* SQLite closes a file whose open failed when its pMethods is set:
	 * ours then, if the file below needs closing too. */
	const sqlite3_io_methods *m = f->below->pMethods;
	if (m == NULL) {
		file->pMethods = NULL;
		return rc;
	}
	int v = m->iVersion < 1 ? 1 : m->iVersion > 3 ? 3 : m->iVersion;
	file->pMethods = &wal_methods[v - 1];
	/* When the database file does not promise "powersafe overwrite"
	 * (the unix VFS does unless the database is opened with psow=0),
	 * SQLite pads each commit to the sector, syncs before the sector's
	 * end and writes the rest of the last frame after the sync: that
	 * write would be held past the sync, so such a WAL is written
	 * through. SQLite reads the same flag of the same file when it opens
	 * the WAL (sqlite3WalOpen), right after this open. */
	sqlite3_file *db = sqlite3_database_file_object(name);
	if (rc == SQLITE_OK && db != NULL && db->pMethods != NULL)
		f->gather = (db->pMethods->xDeviceCharacteristics(db) &
			     SQLITE_IOCAP_POWERSAFE_OVERWRITE) != 0;
	return rc;
}

/* The rest of the VFS is the one below's. */
static int vfs_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
	return below_of(vfs)->xDelete(below_of(vfs), name, sync_dir);
}

static int vfs_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
	return below_of(vfs)->xAccess(below_of(vfs), name, flags, out);
}

static int vfs_full_pathname(sqlite3_vfs *vfs, const char *name, int n,
			     char *out)
{
	return below_of(vfs)->xFullPathname(below_of(vfs), name, n, out);
}

static void *vfs_dl_open(sqlite3_vfs *vfs, const char *path)
{
	return below_of(vfs)->xDlOpen(below_of(vfs), path);
}

static void vfs_dl_error(sqlite3_vfs *vfs, int n, char *out)
{
	below_of(vfs)->xDlError(below_of(vfs), n, out);
}

static void (*vfs_dl_sym(sqlite3_vfs *vfs, void *lib, const char *sym))(void)
{
	return below_of(vfs)->xDlSym(below_of(vfs), lib, sym);
}

static void vfs_dl_close(sqlite3_vfs *vfs, void *lib)
{
	below_of(vfs)->xDlClose(below_of(vfs), lib);
}

static int vfs_randomness(sqlite3_vfs *vfs, int n, char *out)
{
	return below_of(vfs)->xRandomness(below_of(vfs), n, out);
}

static int vfs_sleep(sqlite3_vfs *vfs, int us)
{
	return below_of(vfs)->xSleep(below_of(vfs), us);
}

static int vfs_current_time(sqlite3_vfs *vfs, double *out)
{
	return below_of(vfs)->xCurrentTime(below_of(vfs), out);
}

static int vfs_get_last_error(sqlite3_vfs *vfs, int n, char *out)
{
	return below_of(vfs)->xGetLastError(below_of(vfs), n, out);
}

static int vfs_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
	return below_of(vfs)->xCurrentTimeInt64(below_of(vfs), out);
}

static int vfs_set_system_call(sqlite3_vfs *vfs, const char *name,
			       sqlite3_syscall_ptr p)
{
	return below_of(vfs)->xSetSystemCall(below_of(vfs), name, p);
}

static sqlite3_syscall_ptr vfs_get_system_call(sqlite3_vfs *vfs,
					       const char *name)
{
	return below_of(vfs)->xGetSystemCall(below_of(vfs), name);
}

static const char *vfs_next_system_call(sqlite3_vfs *vfs, const char *name)
{
	return below_of(vfs)->xNextSystemCall(below_of(vfs), name);
}

int store__walbuf_register(const char *name, const char *below_name)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	int rc = 0;

	if (sqlite3_initialize() != SQLITE_OK)
		return -ENOMEM;
	pthread_mutex_lock(&lock);
	if (sqlite3_vfs_find(name) != NULL)
		goto out;
	sqlite3_vfs *below = sqlite3_vfs_find(below_name);
	if (below == NULL) {
		rc = -ENOENT;
		goto out;
	}
	sqlite3_vfs *vfs = calloc(1, sizeof(*vfs));
	char *copy = strdup(name);
	if (vfs == NULL || copy == NULL) {
		free(vfs);
		free(copy);
		rc = -ENOMEM;
		goto out;
	}
	int version = below->iVersion > 3 ? 3 : below->iVersion;
	size_t size = (size_t)below->szOsFile + WAL_FILE_SIZE;
	*vfs = (sqlite3_vfs){
		.iVersion = version,
		.szOsFile = (int)size,
		.mxPathname = below->mxPathname,
		.zName = copy,
		.pAppData = below,
		.xOpen = vfs_open,
		.xDelete = vfs_delete,
		.xAccess = vfs_access,
		.xFullPathname = vfs_full_pathname,
		.xDlOpen = below->xDlOpen ? vfs_dl_open : NULL,
		.xDlError = below->xDlError ? vfs_dl_error : NULL,
		.xDlSym = below->xDlSym ? vfs_dl_sym : NULL,
		.xDlClose = below->xDlClose ? vfs_dl_close : NULL,
		.xRandomness = vfs_randomness,
		.xSleep = vfs_sleep,
		.xCurrentTime = vfs_current_time,
		.xGetLastError = vfs_get_last_error,
		.xCurrentTimeInt64 = version >= 2 && below->xCurrentTimeInt64
					     ? vfs_current_time_int64
					     : NULL,
		.xSetSystemCall = version >= 3 && below->xSetSystemCall
					  ? vfs_set_system_call
					  : NULL,
		.xGetSystemCall = version >= 3 && below->xGetSystemCall
					  ? vfs_get_system_call
					  : NULL,
		.xNextSystemCall = version >= 3 && below->xNextSystemCall
					   ? vfs_next_system_call
					   : NULL,
	};
	if (sqlite3_vfs_register(vfs, 0) != SQLITE_OK) {
		free(copy);
		free(vfs);
		rc = -ENOMEM;
	}
out:
	pthread_mutex_unlock(&lock);
	return rc;
}

const char *store__walbuf_vfs(void)
{
	return store__walbuf_register("berth-walbuf", NULL) == 0 ? "berth-walbuf"
								 : NULL;
}
