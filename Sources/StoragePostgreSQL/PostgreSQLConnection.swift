internal import CPostgreSQL
import Foundation
import Storage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One `PGconn*` (libpq) and the statements prepared on it.
///
/// Statements go through the extended query protocol: prepared once per connection (`PQprepare`, the server
/// inferring each parameter's type from where it stands), then run with `PQexecPrepared`. Parameters are sent in
/// text format, except blobs, which go as binary `bytea`; results come back as text and are decoded by their
/// column's type (``value(_:_:_:)``). A prepared statement takes exactly one statement, as ``SQLQuerying`` asks.
///
/// `@unchecked Sendable` because it moves between threads but is used by one at a time: while it is checked out
/// of ``PostgreSQLDatabase``'s pool.
final class PostgreSQLConnection: @unchecked Sendable {
    private let handle: OpaquePointer
    /// Where the database lives, without its password, for error messages.
    let location: String
    /// Prepared statement names by SQL text.
    private var prepared: [String: (name: String, placeholders: Int)] = [:]
    private static let preparedLimit = 256
    /// True once a call found the connection broken: it is closed instead of going back to the pool.
    private(set) var isBroken = false

    init(url: String, location: String) throws(StorageError) {
        guard let handle = PQconnectdb(url) else {
            throw StorageError(
                .open, "libpq could not allocate a connection to \(location): the process is out of memory")
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = Self.message(PQerrorMessage(handle))
            PQfinish(handle)
            throw StorageError(
                .unavailable,
                "cannot connect to PostgreSQL at \(location): \(message). Check that it runs, and the URL's host, "
                    + "port, user and database")
        }
        self.handle = handle
        self.location = location
        // Notices ("relation already exists, skipping") would go to standard error; they say nothing to act on.
        PQsetNoticeReceiver(handle, { _, _ in }, nil)
    }

    deinit { PQfinish(handle) }

    /// Whether an idle connection is still usable. An idle connection hears nothing from the server unless it is
    /// being ended (a restart's or `pg_terminate_backend`'s FATAL message, then the end of the stream), so a byte
    /// waiting on its socket, or its end, means it is gone; looked at without reading or waiting.
    var isUsable: Bool {
        guard !isBroken, PQstatus(handle) == CONNECTION_OK else { return false }
        let socket = PQsocket(handle)
        guard socket >= 0 else { return false }
        var byte: UInt8 = 0
        let peeked = recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    /// The result of one statement.
    struct Outcome {
        var rows: [SQLRow]
        /// Rows inserted, updated or deleted.
        var changed: Int
    }

    /// Runs one statement with `params`.
    func run(_ sql: String, _ params: [SQLValue]) throws(StorageError) -> Outcome {
        let statement = try prepare(sql)
        guard statement.placeholders == params.count else {
            throw StorageError(
                .query,
                "the SQL has \(statement.placeholders) placeholder(s) but \(params.count) parameter(s) were given: "
                    + "\(quoted(sql))")
        }
        // Text parameters as NUL-terminated UTF-8, blobs as their bytes (binary format); NULL as a null pointer.
        var buffers: [[CChar]?] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        for value in params {
            switch value {
            case .null:
                buffers.append(nil)
                lengths.append(0)
                formats.append(0)
            case .integer(let integer): Self.appendText(String(integer), &buffers, &lengths, &formats)
            case .real(let real): Self.appendText(real.description, &buffers, &lengths, &formats)
            case .text(let text):
                guard !text.utf8.contains(0) else {
                    throw StorageError(
                        .query,
                        "PostgreSQL text cannot hold a NUL character; store such a value as a blob: \(quoted(sql))")
                }
                Self.appendText(text, &buffers, &lengths, &formats)
            case .blob(let data):
                buffers.append(data.withUnsafeBytes { Array($0.bindMemory(to: CChar.self)) })
                lengths.append(Int32(data.count))
                formats.append(1)
            }
        }
        let result = Self.withPointers(buffers) { pointers in
            PQexecPrepared(handle, statement.name, Int32(params.count), pointers, lengths, formats, 0)
        }
        return try read(result, sql: sql)
    }

    /// Runs a script of statements without parameters (the simple query protocol takes several at once).
    func executeScript(_ sql: String) throws(StorageError) {
        _ = try read(PQexec(handle, PostgreSQLDialect.rewrite(sql).sql), sql: sql)
    }

    /// The prepared statement for `sql`, preparing it on first use.
    private func prepare(_ sql: String) throws(StorageError) -> (name: String, placeholders: Int) {
        if let statement = prepared[sql] { return statement }
        if prepared.count >= Self.preparedLimit {
            _ = try read(PQexec(handle, "DEALLOCATE ALL"), sql: "DEALLOCATE ALL")
            prepared.removeAll()
        }
        let (text, placeholders, isScript) = PostgreSQLDialect.rewrite(sql)
        guard !isScript else {
            throw StorageError(
                .query,
                "the SQL has more than one statement: \(quoted(sql)). Run one statement per call, or put scripts "
                    + "in a migration")
        }
        let name = "s\(prepared.count)_\(UInt32.random(in: 0...UInt32.max))"
        _ = try read(PQprepare(handle, name, text, 0, nil), sql: sql)
        let statement = (name, placeholders)
        prepared[sql] = statement
        return statement
    }

    /// Checks `result` and reads its rows; clears it.
    private func read(_ result: OpaquePointer?, sql: String) throws(StorageError) -> Outcome {
        guard let result else {
            isBroken = PQstatus(handle) != CONNECTION_OK
            throw StorageError(
                isBroken ? .unavailable : .query,
                "PostgreSQL at \(location) gave no result for \(quoted(sql)): \(Self.message(PQerrorMessage(handle)))")
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY else {
            throw error(result, sql: sql)
        }
        let changed = Int(String(cString: PQcmdTuples(result))) ?? 0
        let rowCount = PQntuples(result)
        let columnCount = PQnfields(result)
        guard rowCount > 0, columnCount > 0 else { return Outcome(rows: [], changed: changed) }
        let columns = (0..<columnCount).map { String(cString: PQfname(result, $0)) }
        let types = (0..<columnCount).map { PQftype(result, $0) }
        let index = SQLRow.index(of: columns)
        var rows: [SQLRow] = []
        rows.reserveCapacity(Int(rowCount))
        for row in 0..<rowCount {
            var values: [SQLValue] = []
            values.reserveCapacity(Int(columnCount))
            for column in 0..<columnCount {
                if PQgetisnull(result, row, column) == 1 {
                    values.append(.null)
                    continue
                }
                let bytes = UnsafeRawBufferPointer(
                    start: PQgetvalue(result, row, column), count: Int(PQgetlength(result, row, column)))
                values.append(try Self.value(types[Int(column)], bytes, column: columns[Int(column)]))
            }
            rows.append(SQLRow(columns: columns, values: values, index: index))
        }
        return Outcome(rows: rows, changed: changed)
    }

    /// A text-format column value as one of ``SQLValue``'s storage classes, by the column's type OID
    /// (`pg_type.dat`): integers and booleans as integers, floating point as reals, `bytea` (hex output) as a
    /// blob, `numeric` as an integer when it has no fraction (`sum` of a `bigint`), anything else as text.
    static func value(_ type: UInt32, _ bytes: UnsafeRawBufferPointer, column: String) throws(StorageError) -> SQLValue
    {
        let text = String(decoding: bytes, as: UTF8.self)
        switch type {
        case 16: return .integer(text == "t" ? 1 : 0)  // bool
        case 20, 21, 23, 26:  // int8, int2, int4, oid
            guard let integer = Int64(text) else { throw decodeError(column, text) }
            return .integer(integer)
        case 700, 701:  // float4, float8
            guard let real = Double(text) else { throw decodeError(column, text) }
            return .real(real)
        case 1700:  // numeric
            if let integer = Int64(text) { return .integer(integer) }
            guard let real = Double(text) else { throw decodeError(column, text) }
            return .real(real)
        case 17:  // bytea, in hex output: \x0a1b...
            guard let data = hex(bytes) else { throw decodeError(column, "bytea \(text.prefix(16))...") }
            return .blob(data)
        default:
            return .text(text)
        }
    }

    private static func decodeError(_ column: String, _ text: String) -> StorageError {
        StorageError(.decode, "PostgreSQL returned \"\(text)\" for column \(column), which is not of its type")
    }

    /// `\x` then two hex digits a byte.
    private static func hex(_ bytes: UnsafeRawBufferPointer) -> Data? {
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "\\"), bytes[1] == UInt8(ascii: "x"), bytes.count % 2 == 0
        else { return nil }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var data = Data(capacity: (bytes.count - 2) / 2)
        var index = 2
        while index < bytes.count {
            guard let high = nibble(bytes[index]), let low = nibble(bytes[index + 1]) else { return nil }
            data.append(high << 4 | low)
            index += 2
        }
        return data
    }

    /// The StorageError for a failed statement, by its SQLSTATE (PostgreSQL's Appendix A, "Error Codes").
    private func error(_ result: OpaquePointer, sql: String) -> StorageError {
        let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
        let message = Self.message(PQresultErrorMessage(result))
        if PQstatus(handle) != CONNECTION_OK { isBroken = true }
        let code: StorageError.Code
        switch state {
        case "23505": code = .constraint
        case "40001", "40P01": code = .conflict
        case "53300", "55P03": code = .busy
        case _ where state.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(state) || isBroken:
            isBroken = true
            code = .unavailable
        default: code = .query
        }
        return StorageError(code, "PostgreSQL at \(location) refused \(quoted(sql)): \(message) (SQLSTATE \(state))")
    }

    private static func appendText(
        _ text: String, _ buffers: inout [[CChar]?], _ lengths: inout [Int32], _ formats: inout [Int32]
    ) {
        buffers.append(Array(text.utf8CString))
        lengths.append(0)
        formats.append(0)
    }

    /// Calls `body` with a C array of pointers into `buffers`, valid for the call.
    private static func withPointers<R>(
        _ buffers: [[CChar]?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R
    ) -> R {
        var pointers: [UnsafePointer<CChar>?] = []
        pointers.reserveCapacity(buffers.count)
        func nest(_ index: Int) -> R {
            guard index < buffers.count else { return pointers.withUnsafeBufferPointer { body($0.baseAddress) } }
            guard let buffer = buffers[index] else {
                pointers.append(nil)
                return nest(index + 1)
            }
            return buffer.withUnsafeBufferPointer { bytes in
                pointers.append(bytes.baseAddress)
                return nest(index + 1)
            }
        }
        return nest(0)
    }

    private static func message(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "no message" }
        return String(cString: text).trimmingCharacters(in: .whitespacesAndNewlines)
            .replacingOccurrences(of: "\n", with: " ")
    }

    private static func message(_ text: UnsafeMutablePointer<CChar>?) -> String { message(UnsafePointer(text)) }
}
