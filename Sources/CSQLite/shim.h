#ifndef SIBLINGS_CSQLITE_SHIM_H
#define SIBLINGS_CSQLITE_SHIM_H

#include <sqlite3.h>

/// `SQLITE_TRANSIENT` is a function-like cast (`(sqlite3_destructor_type)-1`) that Swift cannot import.
/// These wrappers bind text and blobs with it, so SQLite copies the bytes before the call returns and
/// Swift's buffers need to live only for the call.
static inline int CSQLite_bind_text_transient(sqlite3_stmt *statement, int index, const char *text,
                                              sqlite3_uint64 length) {
    return sqlite3_bind_text64(statement, index, text, length, SQLITE_TRANSIENT, SQLITE_UTF8);
}

static inline int CSQLite_bind_blob_transient(sqlite3_stmt *statement, int index, const void *bytes,
                                              sqlite3_uint64 length) {
    return sqlite3_bind_blob64(statement, index, bytes, length, SQLITE_TRANSIENT);
}

/// Extended result codes are expressions (`SQLITE_CONSTRAINT | (8<<8)`) that Swift does not import.
static const int CSQLite_CONSTRAINT_UNIQUE = SQLITE_CONSTRAINT_UNIQUE;
static const int CSQLite_CONSTRAINT_PRIMARYKEY = SQLITE_CONSTRAINT_PRIMARYKEY;

#endif
