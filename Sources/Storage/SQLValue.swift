import Foundation

/// One value that goes into a statement as a parameter or comes out of a row as a column: SQLite's five
/// storage classes, which PostgreSQL's types map onto (`bigint`, `double precision`, `text`, `bytea`, NULL).
///
/// Literals convert, so parameters read naturally: `["alice", 42, 1.5, nil, true]` (a `Bool` becomes 0 or 1).
/// Other values convert with ``init(_:)``: `SQLValue(publicKey)` for `Data`, `SQLValue(name)` for a
/// `String?` (nil becomes NULL).
public enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    /// The value of anything ``SQLValueConvertible``: `Int`, `Int64`, `Int32`, `Double`, `Bool`, `String`, `Data`,
    /// or an optional of one of them (nil becomes `.null`).
    public init(_ value: some SQLValueConvertible) {
        self = value.sqlValue
    }

    /// True for `.null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The storage class's name as people read it in an error message ("an integer", "NULL", ...).
    var kindDescription: String {
        switch self {
        case .null: "NULL"
        case .integer: "an integer"
        case .real: "a real"
        case .text: "text"
        case .blob: "a blob"
        }
    }
}

extension SQLValue: ExpressibleByNilLiteral {
    public init(nilLiteral: ()) { self = .null }
}

extension SQLValue: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int64) { self = .integer(value) }
}

extension SQLValue: ExpressibleByFloatLiteral {
    public init(floatLiteral value: Double) { self = .real(value) }
}

extension SQLValue: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self = .text(value) }
}

extension SQLValue: ExpressibleByBooleanLiteral {
    public init(booleanLiteral value: Bool) { self = .integer(value ? 1 : 0) }
}

/// A Swift value that has one ``SQLValue``: what ``SQLValue/init(_:)`` accepts.
public protocol SQLValueConvertible {
    var sqlValue: SQLValue { get }
}

extension SQLValue: SQLValueConvertible {
    public var sqlValue: SQLValue { self }
}

extension Int64: SQLValueConvertible {
    public var sqlValue: SQLValue { .integer(self) }
}

extension Int: SQLValueConvertible {
    public var sqlValue: SQLValue { .integer(Int64(self)) }
}

extension Int32: SQLValueConvertible {
    public var sqlValue: SQLValue { .integer(Int64(self)) }
}

extension Double: SQLValueConvertible {
    public var sqlValue: SQLValue { .real(self) }
}

extension Bool: SQLValueConvertible {
    public var sqlValue: SQLValue { .integer(self ? 1 : 0) }
}

extension String: SQLValueConvertible {
    public var sqlValue: SQLValue { .text(self) }
}

extension Data: SQLValueConvertible {
    public var sqlValue: SQLValue { .blob(self) }
}

extension Optional: SQLValueConvertible where Wrapped: SQLValueConvertible {
    public var sqlValue: SQLValue { self?.sqlValue ?? .null }
}
