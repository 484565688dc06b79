import Foundation
import Storage
import StoragePostgreSQL

/// The two ``SQLDatabase`` backends, for tests that run against each: an in-memory SQLite database, or a scratch
/// schema of its own on the PostgreSQL server the test command starts (scripts/engines.sh).
///
/// The server's URL is `$SIBLINGS_POSTGRES_URL`. When it is not set, a PostgreSQL test throws a
/// ``VectorError``-style error that says how to start one: tests fail, never skip.
public enum TestDatabase: String, Sendable, CaseIterable, CustomStringConvertible {
    case sqlite
    case postgres

    public var description: String { rawValue }

    /// A new, empty database of this backend.
    public func make() throws -> any SQLDatabase {
        switch self {
        case .sqlite: try SQLiteDatabase.inMemory()
        case .postgres: try PostgreSQLDatabase(url: try Self.scratchPostgresURL())
        }
    }

    /// The test server's URL.
    public static func postgresURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["SIBLINGS_POSTGRES_URL"], !url.isEmpty else {
            throw VectorError(
                "SIBLINGS_POSTGRES_URL is not set, so there is no PostgreSQL server for this test: run the test "
                    + "command (scripts/test.sh), which starts one on loopback, or `eval \"$(scripts/engines.sh "
                    + "start)\"` before `swift test`")
        }
        return url
    }

    /// The URL of a new, empty schema on the test server, which a connection made with it uses for every table
    /// (`search_path`), so that tests running at once never see each other's rows.
    public static func scratchPostgresURL() throws -> String {
        let base = try postgresURL()
        let schema = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let admin = try PostgreSQLDatabase(url: base)
        defer { admin.close() }
        try admin.execute("CREATE SCHEMA \(schema)")
        return base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
    }
}
