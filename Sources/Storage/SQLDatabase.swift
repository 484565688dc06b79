import Foundation

/// Runs statements: what a database and a transaction have in common.
///
/// **Placeholders.** Our SQL uses positional `?` placeholders, one ``SQLValue`` per `?` in order. SQLite takes
/// them as they are; ``PostgreSQLDatabase`` rewrites each `?` outside string literals to `$1`, `$2`, ... before
/// preparing. Write SQL both understand: no `?NNN`, `:name` or `$n` placeholders, no `?` inside
/// identifiers.
///
/// **One statement per call.** `execute` and `query` take exactly one statement; scripts (migrations) go
/// through ``SQLTransaction/executeScript(_:)``.
public protocol SQLQuerying {
    /// Runs one statement and returns the number of rows it inserted, updated or deleted (0 for other
    /// statements). Rows it returns (`RETURNING`) are discarded; use ``query(_:_:)`` to read them.
    @discardableResult
    func execute(_ sql: String, _ params: [SQLValue]) throws -> Int

    /// Runs one statement and returns every row it produces.
    func query(_ sql: String, _ params: [SQLValue]) throws -> [SQLRow]

    /// Runs one statement and returns its first row, or nil if it produces none. Stops after the first row;
    /// it does not check that there is only one.
    func queryOne(_ sql: String, _ params: [SQLValue]) throws -> SQLRow?

    /// Runs one statement and calls `body` with each row as it is read, so that a result of any size is never
    /// whole in memory (a snapshot of a store of gigabytes). Inside a transaction the rows come from its one
    /// view. An implementation that cannot stream may read them all first (the default does).
    func forEachRow(_ sql: String, _ params: [SQLValue], _ body: (SQLRow) throws -> Void) throws
}

extension SQLQuerying {
    public func forEachRow(_ sql: String, _ params: [SQLValue], _ body: (SQLRow) throws -> Void) throws {
        for row in try query(sql, params) { try body(row) }
    }

    /// Runs one statement without parameters; see ``execute(_:_:)``.
    @discardableResult
    public func execute(_ sql: String) throws -> Int {
        try execute(sql, [])
    }

    /// Runs one query without parameters; see ``query(_:_:)``.
    public func query(_ sql: String) throws -> [SQLRow] {
        try query(sql, [])
    }

    /// Runs one query without parameters; see ``queryOne(_:_:)``.
    public func queryOne(_ sql: String) throws -> SQLRow? {
        try queryOne(sql, [])
    }
}

/// The inside of ``SQLDatabase/transaction(_:)``: statements that commit together or not at all.
///
/// Reads through the transaction see its own uncommitted writes. It is valid only inside the body it was passed
/// to; afterwards every call throws ``StorageError/Code/closed``. It is not `Sendable`: keep it on the body's
/// thread.
public protocol SQLTransaction: SQLQuerying {
    /// Runs a script of several `;`-separated statements without parameters (a migration).
    func executeScript(_ sql: String) throws
}

/// One schema step of a component: `sql` (one or more statements) takes the component's schema from
/// `version - 1` to `version`. Versions start at 1 and never change once released: add a migration, never edit
/// one.
public struct Migration: Sendable, Hashable {
    public let version: Int
    public let sql: String

    public init(version: Int, sql: String) {
        self.version = version
        self.sql = sql
    }
}

/// The database a service keeps all its state in; services depend on this protocol, never on a backend: the
/// embedded ``SQLiteDatabase``, or ``PostgreSQLDatabase`` for several nodes on one database.
///
/// **Synchronous and thread-safe.** Every call is a synchronous throwing call, safe to make from any thread or
/// task at the same time as others. Embedded SQLite answers in microseconds, so an `async` API would cost more
/// (a hop per call) than it saves. The cost: a call blocks its thread while it waits for the single writer
/// (``SQLiteDatabase`` serializes writes) and while SQLite works, so keep transactions short and never do slow
/// work (network, hashing passwords) inside a transaction body; the body cannot `await`, by design.
///
/// **Transactions do not nest.** Inside a ``transaction(_:)`` body, use only the transaction the body receives;
/// calling the database itself (or starting another transaction) throws ``StorageError/Code/nestedTransaction``
/// instead of deadlocking.
///
/// Errors thrown are ``StorageError``s, except that ``transaction(_:)`` rethrows whatever its body throws.
public protocol SQLDatabase: SQLQuerying, Sendable {
    /// Runs `body` in one transaction: committed if `body` returns, rolled back if it throws (the error is
    /// rethrown). SQLite starts it with `BEGIN IMMEDIATE`, taking the write lock at once so it cannot fail halfway
    /// with "database is locked". PostgreSQL runs it SERIALIZABLE and runs `body` again when it collided with
    /// another transaction, so `body` must only touch the database: nothing it changes elsewhere may count until
    /// this returns.
    @discardableResult
    func transaction<T>(_ body: (any SQLTransaction) throws -> T) throws -> T

    /// Runs `body` in a transaction that holds the lock `name` until it ends: every transaction naming the same
    /// lock, in any process on this database, runs one at a time, and each sees everything committed before it got
    /// the lock. For work that must have exactly one writer across nodes (the transparency log's sequencer,
    /// migrations). SQLite's transactions hold its one write lock already, so there it is ``transaction(_:)``;
    /// PostgreSQL takes a transaction-scoped advisory lock, at READ COMMITTED so that the statements after it see
    /// what the lock's previous holder committed. As with ``transaction(_:)``, `body` may run more than once.
    @discardableResult
    func transaction<T>(exclusive name: String, _ body: (any SQLTransaction) throws -> T) throws -> T

    /// Runs `body`'s reads on one consistent view of the database (a read-only transaction): every statement sees
    /// the state as of the first, while writers go on and commit. For a long read that must be one photograph,
    /// such as a device exporting its whole store in pages. SQLite runs it on a reader connection (WAL keeps its
    /// view), so it neither takes nor waits for the write lock. `body` must only read.
    func readTransaction<T>(_ body: (any SQLQuerying) throws -> T) throws -> T

    /// Brings `component`'s schema up to the newest of `migrations`, which must be numbered 1, 2, 3, ... with no
    /// gap. Returns the versions it applied (empty if the database was up to date).
    ///
    /// Versions are recorded per component in `schema_migrations(component, version, applied_at)`, so several
    /// services share one database. All pending migrations apply in one transaction: if one fails, none is
    /// recorded and the schema is as before. Refuses (``StorageError/Code/migration``) a database whose recorded
    /// version is newer than `migrations` knows (written by a newer pixie-server), and recorded versions with a
    /// gap. A migration's SQL must not contain `BEGIN`/`COMMIT`.
    @discardableResult
    func migrate(component: String, migrations: [Migration]) throws -> [Int]
}

extension SQLDatabase {
    /// The portable implementation: `schema_migrations` and the checks, in one transaction that holds the lock
    /// `schema_migrations` (nodes starting together apply each migration once; the others wait, then find the
    /// versions recorded).
    @discardableResult
    public func migrate(component: String, migrations: [Migration]) throws -> [Int] {
        try checkMigrations(component: component, migrations: migrations)
        return try transaction(exclusive: "schema_migrations") { transaction in
            try applyMigrations(component: component, migrations: migrations, in: transaction)
        }
    }

    /// Refuses an empty component name, and migrations not numbered 1, 2, 3, ...
    private func checkMigrations(component: String, migrations: [Migration]) throws(StorageError) {
        guard !component.isEmpty else {
            throw StorageError(.migration, "the component name is empty: name the service that owns the schema")
        }
        let known = migrations.map(\.version)
        guard isNumberedFromOne(known) else {
            throw StorageError(
                .migration,
                "the migrations of \"\(component)\" are numbered \(known), but must be 1, 2, 3, ... in order with "
                    + "no gap or duplicate: a migration is missing or misnumbered in the code")
        }
    }

    /// Applies, in `transaction`, every migration above the component's recorded version, and records each.
    private func applyMigrations(
        component: String, migrations: [Migration], in transaction: any SQLTransaction
    ) throws -> [Int] {
        try transaction.executeScript(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                component TEXT NOT NULL,
                version INTEGER NOT NULL,
                applied_at BIGINT NOT NULL,
                PRIMARY KEY (component, version)
            )
            """)
        let recorded = try transaction.query(
            "SELECT version FROM schema_migrations WHERE component = ? ORDER BY version", [.text(component)]
        ).map { row throws(StorageError) in try row.int("version") }
        guard isNumberedFromOne(recorded) else {
            throw StorageError(
                .migration,
                "this database records versions \(recorded) of \"\(component)\", with a gap: the schema is in an "
                    + "unknown state; restore the data directory from a backup")
        }
        let current = recorded.count
        guard current <= migrations.count else {
            throw StorageError(
                .migration,
                "this database was written by a newer pixie-server: \"\(component)\" is at schema version "
                    + "\(current), this build knows versions up to \(migrations.count). Run the newer pixie-server, "
                    + "or restore a backup made by this version")
        }
        let appliedAt = Int64(Date().timeIntervalSince1970)
        var applied: [Int] = []
        for migration in migrations where migration.version > current {
            do {
                try transaction.executeScript(migration.sql)
            } catch let error as StorageError {
                throw StorageError(
                    .migration,
                    "migration \(migration.version) of \"\(component)\" failed, so no migration of this run was "
                        + "applied: \(error.reason). Fix the migration's SQL")
            }
            try transaction.execute(
                "INSERT INTO schema_migrations (component, version, applied_at) VALUES (?, ?, ?)",
                [.text(component), SQLValue(migration.version), .integer(appliedAt)])
            applied.append(migration.version)
        }
        return applied
    }
}

/// True if `versions` is 1, 2, 3, ... (or empty).
private func isNumberedFromOne(_ versions: [Int]) -> Bool {
    versions.enumerated().allSatisfy { $0.element == $0.offset + 1 }
}
