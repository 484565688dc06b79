import Foundation

/// One row of a query's result: the values by column name, read with typed getters that throw
/// ``StorageError/Code/decode`` naming the column when it is missing, NULL or of another type.
///
/// ```swift
/// let row = try db.queryOne("SELECT pubkey, expires_at FROM passkeys WHERE id = ?", [.text(id)])
/// let publicKey = try row?.data("pubkey")
/// let expiresAt = try row?.int64("expires_at")
/// ```
///
/// Column names are the result's names: a column's own name, or its `AS` alias for an expression
/// (`SELECT count(*) AS n`). If two columns share a name, the getters read the first.
public struct SQLRow: Sendable, Hashable {
    /// The column names, in the order of the SELECT list.
    public let columns: [String]
    /// The values, one per column.
    public let values: [SQLValue]
    /// Column name to position; one dictionary shared (copy-on-write) by every row of a result.
    private let index: [String: Int]

    /// A row of `columns` and `values` (equal counts), for backends and tests.
    public init(columns: [String], values: [SQLValue]) {
        precondition(columns.count == values.count, "SQLRow needs one value per column")
        self.init(columns: columns, values: values, index: SQLRow.index(of: columns))
    }

    package init(columns: [String], values: [SQLValue], index: [String: Int]) {
        self.columns = columns
        self.values = values
        self.index = index
    }

    package static func index(of columns: [String]) -> [String: Int] {
        Dictionary(columns.enumerated().map { ($0.element, $0.offset) }, uniquingKeysWith: { first, _ in first })
    }

    /// The value of `column`, or nil if the row has no such column.
    public subscript(column: String) -> SQLValue? {
        index[column].map { values[$0] }
    }

    /// The value of `column`; throws `.decode` if the row has no such column.
    public func value(_ column: String) throws(StorageError) -> SQLValue {
        guard let position = index[column] else {
            throw StorageError(
                .decode,
                "the row has no column \"\(column)\" (it has \(columns.map { "\"\($0)\"" }.joined(separator: ", "))): "
                    + "check the SELECT list and its AS names")
        }
        return values[position]
    }

    // MARK: Typed getters: NULL is an error; use the optional variants where NULL is allowed.

    /// An integer column.
    public func int64(_ column: String) throws(StorageError) -> Int64 {
        try required(column, "an integer", "optionalInt64", optionalInt64(column))
    }

    /// An integer column as `Int`.
    public func int(_ column: String) throws(StorageError) -> Int {
        Int(try int64(column))
    }

    /// A real column; an integer value converts (SQLite stores whole reals in REAL columns as reals, but an
    /// expression like `sum(x)` may return an integer).
    public func double(_ column: String) throws(StorageError) -> Double {
        try required(column, "a real", "optionalDouble", optionalDouble(column))
    }

    /// A text column.
    public func string(_ column: String) throws(StorageError) -> String {
        try required(column, "text", "optionalString", optionalString(column))
    }

    /// A blob column; an empty blob is empty `Data`, not NULL.
    public func data(_ column: String) throws(StorageError) -> Data {
        try required(column, "a blob", "optionalData", optionalData(column))
    }

    /// An integer column that holds 0 or 1.
    public func bool(_ column: String) throws(StorageError) -> Bool {
        try required(column, "a boolean (0 or 1)", "optionalBool", optionalBool(column))
    }

    // MARK: Optional getters: nil for NULL; a missing column or another type still throws.

    /// An integer column that may be NULL.
    public func optionalInt64(_ column: String) throws(StorageError) -> Int64? {
        switch try value(column) {
        case .null: return nil
        case .integer(let value): return value
        case let other: throw mismatch(column, expected: "an integer", got: other)
        }
    }

    /// An integer column that may be NULL, as `Int`.
    public func optionalInt(_ column: String) throws(StorageError) -> Int? {
        try optionalInt64(column).map { Int($0) }
    }

    /// A real (or integer) column that may be NULL.
    public func optionalDouble(_ column: String) throws(StorageError) -> Double? {
        switch try value(column) {
        case .null: return nil
        case .real(let value): return value
        case .integer(let value): return Double(value)
        case let other: throw mismatch(column, expected: "a real", got: other)
        }
    }

    /// A text column that may be NULL.
    public func optionalString(_ column: String) throws(StorageError) -> String? {
        switch try value(column) {
        case .null: return nil
        case .text(let value): return value
        case let other: throw mismatch(column, expected: "text", got: other)
        }
    }

    /// A blob column that may be NULL.
    public func optionalData(_ column: String) throws(StorageError) -> Data? {
        switch try value(column) {
        case .null: return nil
        case .blob(let value): return value
        case let other: throw mismatch(column, expected: "a blob", got: other)
        }
    }

    /// A 0-or-1 integer column that may be NULL.
    public func optionalBool(_ column: String) throws(StorageError) -> Bool? {
        switch try value(column) {
        case .null: return nil
        case .integer(0): return false
        case .integer(1): return true
        case let other: throw mismatch(column, expected: "a boolean (0 or 1)", got: other)
        }
    }

    private func required<T>(
        _ column: String, _ expected: String, _ optionalGetter: String, _ value: T?
    ) throws(StorageError) -> T {
        guard let value else {
            throw StorageError(
                .decode,
                "column \"\(column)\" is NULL, expected \(expected): read it with \(optionalGetter)(\"\(column)\") "
                    + "if NULL is allowed, or make the column NOT NULL")
        }
        return value
    }

    private func mismatch(_ column: String, expected: String, got: SQLValue) -> StorageError {
        let shown: String
        switch got {
        case .integer(let value) where expected.hasPrefix("a boolean"): shown = "the integer \(value)"
        default: shown = got.kindDescription
        }
        return StorageError(
            .decode,
            "column \"\(column)\" holds \(shown), expected \(expected): check the schema and the getter used")
    }
}
