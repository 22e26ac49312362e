/*
 * fuzz_nsys.c - libFuzzer harness for the Nsight Systems SQLite-export
 * importer, kp_import_nsys.
 *
 * Two kinds of input:
 *   - raw bytes, written to a file and imported as is (a corrupt or
 *     truncated export, what a user could pass);
 *   - an input starting with "SQL\n": the rest is SQL run into a fresh
 *     SQLite file that is then imported. Mutating SQL reaches the importer's
 *     own logic (missing tables and columns, NULLs, wrong types, huge or
 *     negative values, dangling StringIds ids) far more often than mutating
 *     database pages, which mostly exercises SQLite's own checks. The SQL
 *     runs with ATTACH disabled and a bounded number of VM steps, so it can
 *     neither touch other files nor run forever.
 */
#include "fuzz_import.h"

#include <sqlite3.h>

static int fz_progress(void *arg)
{
	int *steps = arg;

	return ++*steps > 2000;   /* x 1000 VM instructions */
}

/* Build the export at path from sql; 0 when the SQL ran (even in part). */
static int build_from_sql(const char *path, const uint8_t *sql, size_t len)
{
	char *text = malloc(len + 1);
	sqlite3 *h = NULL;
	int steps = 0;

	if (!text)
		return -1;
	memcpy(text, sql, len);
	text[len] = '\0';
	unlink(path);
	if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
		sqlite3_close(h);
		free(text);
		return -1;
	}
	sqlite3_limit(h, SQLITE_LIMIT_ATTACHED, 0);
	sqlite3_limit(h, SQLITE_LIMIT_LENGTH, 1 << 20);
	sqlite3_exec(h, "PRAGMA synchronous=OFF; PRAGMA journal_mode=MEMORY", NULL, NULL, NULL);
	sqlite3_progress_handler(h, 1000, fz_progress, &steps);
	/* errors are fine: whatever the statements before the error made stays */
	sqlite3_exec(h, text, NULL, NULL, NULL);
	sqlite3_close(h);
	free(text);
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_db_open();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path;

	if (size >= 4 && !memcmp(data, "SQL\n", 4)) {
		path = fz_path("export.sqlite");
		if (build_from_sql(path, data + 4, size - 4))
			return 0;
	} else {
		path = fz_write("export.sqlite", data, size);
	}
	fz_import(kp_import_nsys, path);
	/* a raw input may name a WAL journal: leave no side files for the next */
	unlink(fz_path("export.sqlite-wal"));
	unlink(fz_path("export.sqlite-shm"));
	unlink(fz_path("export.sqlite-journal"));
	return 0;
}
