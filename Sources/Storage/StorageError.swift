/// The one error type of the Storage module.
///
/// Shaped like ``SiblingsCrypto/CryptoError``: a `code` that can grow without breaking callers, a `reason`
/// that says what was wrong and what to do, and where it was thrown. Branch on `code`, never on `reason`:
///
/// ```swift
/// do {
///     try db.execute("INSERT INTO accounts (phone) VALUES (?)", [.text(phone)])
/// } catch let error as StorageError where error.code == .constraint {
///     throw HTTPError(.conflict, Code("already_registered"), "this phone number is already registered")
/// }
/// ```
public struct StorageError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare with the static members: `error.code == .constraint`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// A short `camelCase` word, stable across releases.
        public let rawValue: String

        /// A code of a backend's own; prefer the static members.
        public init(_ rawValue: String) { self.rawValue = rawValue }

        /// The database could not be opened: a bad path, missing permissions, or a file that is not a database.
        public static let open = Code("open")
        /// A UNIQUE or PRIMARY KEY constraint refused the row: the value already exists. Services map this to
        /// their "already registered" answers. (NOT NULL, CHECK and FOREIGN KEY failures are `.query`: they are
        /// bugs in the caller, not answers for a client.)
        public static let constraint = Code("constraint")
        /// The database stayed locked by another connection or process for longer than the busy timeout.
        public static let busy = Code("busy")
        /// A transaction kept colliding with concurrent ones (PostgreSQL's serialization failures and deadlocks,
        /// SQLSTATE 40001 and 40P01) after ``PostgreSQLDatabase`` ran it again several times: try again later.
        public static let conflict = Code("conflict")
        /// The database server cannot be reached, or dropped the connection (restarting, or down): what was not
        /// acknowledged was not done; try again once it is back.
        public static let unavailable = Code("unavailable")
        /// Migrations could not be applied: a failing script, a gap in the versions, or a database written by a
        /// newer program.
        public static let migration = Code("migration")
        /// A statement failed: a syntax error, a wrong parameter count, a NOT NULL/CHECK/FOREIGN KEY failure, or an
        /// I/O error. The reason carries SQLite's (or the server's) own message.
        public static let query = Code("query")
        /// A column is missing from a row or holds a value of another type; the reason names the column.
        public static let decode = Code("decode")
        /// The database was closed, or a transaction was used after its body returned.
        public static let closed = Code("closed")
        /// The database itself was used inside one of its own transaction bodies (which would deadlock); use the
        /// transaction that the body receives instead.
        public static let nestedTransaction = Code("nestedTransaction")

        public var description: String { rawValue }
    }

    public let code: Code
    public let reason: String
    public let file: String
    public let line: UInt

    /// An error of `code`; `reason` says what was wrong and what to do.
    public init(_ code: Code, _ reason: String, file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    public var description: String { "StorageError.\(code): \(reason) (\(file):\(line))" }
}
