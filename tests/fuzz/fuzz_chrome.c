/*
 * fuzz_chrome.c - libFuzzer harness for the Chrome-trace (PyTorch profiler
 * JSON) importer, kp_import_chrome. The importer reads a path (it streams
 * through zlib's gzread, which takes plain and gzip input alike), so each
 * input is written to a scratch file first. See fuzz_import.h for the
 * checks made on every input.
 */
#include "fuzz_import.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_db_open();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_import(kp_import_chrome, fz_write("trace.json", data, size));
	return 0;
}
