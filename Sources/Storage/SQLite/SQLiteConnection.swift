internal import CSQLite
import Foundation

/// One `sqlite3*` connection and its prepared-statement cache.
///
/// Opened with `SQLITE_OPEN_NOMUTEX` (SQLite's multi-thread mode): SQLite does not lock the connection itself,
/// because ``SQLiteDatabase`` never lets two threads use one connection at once.
///
/// `@unchecked Sendable` because it moves between threads but is used by one at a time: the writer only
/// inside the writer `Mutex`, a reader only while it is checked out of the reader pool (taken out of the pool's
/// `Mutex`, put back when done).
final class SQLiteConnection: @unchecked Sendable {
    let handle: OpaquePointer
    /// Where the database lives, for error messages.
    let location: String
    /// Prepared statements by SQL text, prepared once with `SQLITE_PREPARE_PERSISTENT` and reused.
    private var statements: [String: SQLiteStatement] = [:]
    /// Dynamic SQL could grow the cache without bound; past this many statements it starts over.
    private static let statementCacheLimit = 256

    init(
        path: String, location: String, readOnly: Bool, create: Bool = true, busyTimeoutMilliseconds: Int32
    ) throws(StorageError) {
        var handle: OpaquePointer?
        let access =
            readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0))
        let flags = access | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_close_v2(handle)
            throw StorageError(
                .open,
                "cannot open the database \(location): \(message) (SQLite code \(code)). Check that the directory "
                    + "exists and this user may write to it")
        }
        self.handle = handle
        self.location = location
        sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
    }

    deinit {
        // sqlite3_close_v2 defers the close until every statement is finalized, so the order does not matter.
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    // MARK: Statements

    /// The cached prepared statement for `sql`, preparing it on first use.
    func statement(_ sql: String) throws(StorageError) -> SQLiteStatement {
        if let statement = statements[sql] { return statement }
        var prepared: OpaquePointer?
        var rest = ""
        let code = sql.withCString { text in
            var tail: UnsafePointer<CChar>?
            let code = sqlite3_prepare_v3(handle, text, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, &tail)
            if let tail { rest = String(cString: tail) }
            return code
        }
        guard code == SQLITE_OK else { throw error(code, "preparing", sql: sql) }
        guard let prepared else {
            throw StorageError(.query, "the SQL has no statement (it is empty or only comments): \(quoted(sql))")
        }
        let statement = SQLiteStatement(prepared)
        guard rest.trimmingCharacters(in: .whitespacesAndNewlines.union(CharacterSet(charactersIn: ";"))).isEmpty
        else {
            throw StorageError(
                .query,
                "the SQL has more than one statement: \(quoted(sql)). Run one statement per call, or put scripts "
                    + "in a migration")
        }
        if statements.count >= Self.statementCacheLimit { statements.removeAll() }
        statements[sql] = statement
        return statement
    }

    /// Runs `sql` with `params`; returns the rows (at most `limit`) or, for `execute`, none.
    func run(_ sql: String, _ params: [SQLValue], limit: Int = .max) throws(StorageError) -> [SQLRow] {
        try run(try statement(sql), sql, params, limit: limit)
    }

    func run(
        _ statement: SQLiteStatement, _ sql: String, _ params: [SQLValue], limit: Int = .max
    ) throws(StorageError) -> [SQLRow] {
        var rows: [SQLRow] = []
        do {
            try step(statement, sql, params, limit: limit) { rows.append($0) }
        } catch let error as StorageError {
            throw error
        } catch {
            fatalError("appending a row does not throw")
        }
        return rows
    }

    /// Runs `sql` with `params` on a statement of its own (not the cache's, so that `body` may run any statement
    /// meanwhile) and calls `body` with each row as SQLite steps to it.
    func each(_ sql: String, _ params: [SQLValue], _ body: (SQLRow) throws -> Void) throws {
        var prepared: OpaquePointer?
        let code = sql.withCString { sqlite3_prepare_v2(handle, $0, -1, &prepared, nil) }
        guard code == SQLITE_OK else { throw error(code, "preparing", sql: sql) }
        guard let prepared else {
            throw StorageError(.query, "the SQL has no statement (it is empty or only comments): \(quoted(sql))")
        }
        try step(SQLiteStatement(prepared), sql, params, limit: .max, body)
    }

    /// Binds `params` and steps `statement` up to `limit` rows, calling `body` with each; resets it after.
    private func step(
        _ statement: SQLiteStatement, _ sql: String, _ params: [SQLValue], limit: Int,
        _ body: (SQLRow) throws -> Void
    ) throws {
        let stmt = statement.handle
        defer {
            sqlite3_reset(stmt)
            sqlite3_clear_bindings(stmt)
        }
        try bind(params, to: stmt, sql: sql)
        var count = 0
        var columns: [String] = []
        var index: [String: Int] = [:]
        while count < limit {
            let code = sqlite3_step(stmt)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw error(code, "running", sql: sql) }
            if count == 0 {
                // Names are read per run, not cached: a schema change re-prepares `SELECT *` with new columns.
                let columnCount = sqlite3_column_count(stmt)
                columns = (0..<columnCount).map { String(cString: sqlite3_column_name(stmt, $0)) }
                index = SQLRow.index(of: columns)
            }
            let values = (0..<Int32(columns.count)).map { column(stmt, $0) }
            count += 1
            try body(SQLRow(columns: columns, values: values, index: index))
        }
    }

    /// Runs `sql` for its effect; returns the rows it changed (0 for statements that change none).
    func execute(_ sql: String, _ params: [SQLValue]) throws(StorageError) -> Int {
        let before = sqlite3_total_changes64(handle)
        let statement = try statement(sql)
        let stmt = statement.handle
        defer {
            sqlite3_reset(stmt)
            sqlite3_clear_bindings(stmt)
        }
        try bind(params, to: stmt, sql: sql)
        while true {
            let code = sqlite3_step(stmt)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw error(code, "running", sql: sql) }
        }
        // sqlite3_changes64 keeps the count of the last INSERT/UPDATE/DELETE; after DDL it would be stale.
        return sqlite3_total_changes64(handle) == before ? 0 : Int(sqlite3_changes64(handle))
    }

    /// Runs a script of statements without parameters (`sqlite3_exec`); not cached.
    func executeScript(_ sql: String) throws(StorageError) {
        let code = sqlite3_exec(handle, sql, nil, nil, nil)
        guard code == SQLITE_OK else { throw error(code, "running", sql: sql) }
    }

    /// True while a transaction is open (SQLite rolls back by itself after some errors).
    var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    private func bind(_ params: [SQLValue], to stmt: OpaquePointer, sql: String) throws(StorageError) {
        let expected = Int(sqlite3_bind_parameter_count(stmt))
        guard expected == params.count else {
            throw StorageError(
                .query,
                "the SQL has \(expected) placeholder(s) but \(params.count) parameter(s) were given: \(quoted(sql))")
        }
        for (offset, value) in params.enumerated() {
            let position = Int32(offset + 1)
            let code: Int32
            switch value {
            case .null:
                code = sqlite3_bind_null(stmt, position)
            case .integer(let integer):
                code = sqlite3_bind_int64(stmt, position, integer)
            case .real(let real):
                code = sqlite3_bind_double(stmt, position, real)
            case .text(let text):
                // withCString gives a non-null pointer even for "" (a null pointer would bind NULL); the length
                // comes from the UTF-8 count, so text with NUL characters stays whole.
                code = text.withCString { pointer in
                    CSQLite_bind_text_transient(stmt, position, pointer, sqlite3_uint64(text.utf8.count))
                }
            case .blob(let data):
                code = data.withUnsafeBytes { bytes in
                    // A null pointer binds NULL, so an empty blob is bound as a zero-length blob explicitly.
                    guard let base = bytes.baseAddress, bytes.count > 0 else {
                        return sqlite3_bind_zeroblob(stmt, position, 0)
                    }
                    return CSQLite_bind_blob_transient(stmt, position, base, sqlite3_uint64(bytes.count))
                }
            }
            guard code == SQLITE_OK else { throw error(code, "binding parameter \(position) of", sql: sql) }
        }
    }

    private func column(_ stmt: OpaquePointer, _ position: Int32) -> SQLValue {
        switch sqlite3_column_type(stmt, position) {
        case SQLITE_INTEGER:
            return .integer(sqlite3_column_int64(stmt, position))
        case SQLITE_FLOAT:
            return .real(sqlite3_column_double(stmt, position))
        case SQLITE_TEXT:
            let text = sqlite3_column_text(stmt, position)
            let count = Int(sqlite3_column_bytes(stmt, position))
            guard let text else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let bytes = sqlite3_column_blob(stmt, position)
            let count = Int(sqlite3_column_bytes(stmt, position))
            guard let bytes, count > 0 else { return .blob(Data()) }
            return .blob(Data(bytes: bytes, count: count))
        default:
            return .null
        }
    }

    // MARK: Errors

    /// The error for a failed call, with SQLite's message for this connection.
    func error(_ code: Int32, _ doing: String, sql: String) -> StorageError {
        let message = String(cString: sqlite3_errmsg(handle))
        let primary = code & 0xff
        let what = "\(doing) \(quoted(sql)) failed: \(message) (SQLite code \(code))"
        switch primary {
        case SQLITE_CONSTRAINT
        where code == CSQLite_CONSTRAINT_UNIQUE || code == CSQLite_CONSTRAINT_PRIMARYKEY:
            return StorageError(.constraint, "\(what): a row with this key already exists")
        case SQLITE_BUSY, SQLITE_LOCKED:
            return StorageError(
                .busy,
                "\(what): another connection held the lock past the busy timeout. Is another pixie-server using "
                    + "the data directory \(location)? Retry, or stop the other process")
        case SQLITE_NOTADB, SQLITE_CANTOPEN:
            return StorageError(
                .open,
                "\(what): \(location) is not a usable SQLite database; check the --data-dir path and the file")
        case SQLITE_READONLY:
            return StorageError(
                .query,
                "\(what): the database \(location) is read-only; check the file's permissions")
        case SQLITE_CONSTRAINT:
            return StorageError(.query, "\(what): the row breaks a NOT NULL, CHECK or FOREIGN KEY constraint")
        default:
            return StorageError(.query, what)
        }
    }
}

/// One prepared statement; finalized when the connection's cache lets go of it.
final class SQLiteStatement {
    let handle: OpaquePointer

    init(_ handle: OpaquePointer) { self.handle = handle }

    deinit { sqlite3_finalize(handle) }

    /// True if the statement does not write (a SELECT); writes go to the writer connection.
    var isReadOnly: Bool { sqlite3_stmt_readonly(handle) != 0 }
}

/// SQL shortened for an error message.
package func quoted(_ sql: String) -> String {
    let flat = sql.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    return "\"" + (flat.count > 160 ? flat.prefix(160) + "..." : flat) + "\""
}
