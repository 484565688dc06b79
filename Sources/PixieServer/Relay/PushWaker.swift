import Foundation
import PixieWire
import Storage
import Synchronization

/// What ``PushWaker/claim(_:)`` decided.
enum PushClaim: Equatable {
    /// Push each of these, once.
    case push([Data])
    case deduplicated
    case unregistered
}

/// The push rule's state: which push targets each subject has (registered with SUBSCRIBE; a device inbox has one
/// device, the account's discovery inbox one per sibling, at most ``PushWaker/maximumTargetsPerSubject``, the
/// latest kept), and which are in a wake episode (pushed once, not yet subscribed again).
protocol PushWaker: Sendable {
    /// Records `pushToken` as a push target of the subject (an empty token records nothing).
    func register(_ subject: RelaySubject, pushToken: Data)
    /// A connection subscribed `subject`: a device is awake on it, and its wake episode is over for every target.
    func reconnected(_ subject: RelaySubject)
    /// A push to `pushToken` failed: the next Sync frame may try it again.
    func failed(_ subject: RelaySubject, pushToken: Data)
    /// What to push now: every target not woken yet in this episode; later Sync frames are deduplicated.
    func claim(_ subject: RelaySubject) -> PushClaim
    /// Drops every target of `subject`: identity-svc ended it (a removed device's inbox, a rotated-away discovery
    /// inbox), so no frame sent to it wakes anyone again.
    func forget(_ subject: RelaySubject)
}

extension PushWaker {
    /// Push targets one subject keeps: more siblings than one account is likely to have.
    static var maximumTargetsPerSubject: Int { 16 }
}

/// One node's push state, in memory (the embedded default).
final class MemoryPushWaker: PushWaker {
    private struct Target {
        let token: Data
        var woken = false
    }

    private let targets = Mutex<[RelaySubject: [Target]]>([:])
    private let limit: Int

    /// `limit`: subjects with targets held at most.
    init(limit: Int) { self.limit = limit }

    func register(_ subject: RelaySubject, pushToken: Data) {
        guard !pushToken.isEmpty else { return }
        targets.withLock { targets in
            guard targets[subject] != nil || targets.count < limit else { return }
            var list = targets[subject] ?? []
            let woken = list.first { $0.token == pushToken }?.woken ?? false
            list.removeAll { $0.token == pushToken }
            list.append(Target(token: pushToken, woken: woken))
            targets[subject] = Array(list.suffix(Self.maximumTargetsPerSubject))
        }
    }

    func reconnected(_ subject: RelaySubject) {
        targets.withLock { targets in
            guard let list = targets[subject] else { return }
            targets[subject] = list.map { Target(token: $0.token) }
        }
    }

    func failed(_ subject: RelaySubject, pushToken: Data) {
        targets.withLock { targets in
            guard let index = targets[subject]?.firstIndex(where: { $0.token == pushToken }) else { return }
            targets[subject]?[index].woken = false
        }
    }

    func forget(_ subject: RelaySubject) {
        _ = targets.withLock { $0.removeValue(forKey: subject) }
    }

    func claim(_ subject: RelaySubject) -> PushClaim {
        targets.withLock { targets in
            guard var list = targets[subject], !list.isEmpty else { return .unregistered }
            let due = list.indices.filter { !list[$0].woken }
            guard !due.isEmpty else { return .deduplicated }
            for index in due { list[index].woken = true }
            targets[subject] = list
            return .push(due.map { list[$0].token })
        }
    }
}

/// The push state of every relay node of a deployment, in their shared database (table `relay_push_targets`), so
/// that a sleeping device is pushed once per wake episode, not once per node. A claim is one conditional UPDATE,
/// so two nodes claiming at once push each target once. A database that fails reads as "unregistered": no push,
/// and a warning.
final class SQLPushWaker: PushWaker {
    static let migrations = [
        Migration(
            version: 1,
            sql: """
                CREATE TABLE relay_push (
                    subject BLOB PRIMARY KEY,
                    push_token BLOB NOT NULL,
                    woken INTEGER NOT NULL DEFAULT 0,
                    updated_at INTEGER NOT NULL
                )
                """),
        // Issue 37: the account's discovery inbox wakes every sibling that registered for it, so a subject has
        // several targets, each with its own wake flag.
        Migration(
            version: 2,
            sql: """
                CREATE TABLE relay_push_targets (
                    subject BLOB NOT NULL,
                    push_token BLOB NOT NULL,
                    woken INTEGER NOT NULL DEFAULT 0,
                    updated_at INTEGER NOT NULL,
                    PRIMARY KEY (subject, push_token)
                );
                INSERT INTO relay_push_targets (subject, push_token, woken, updated_at)
                    SELECT subject, push_token, woken, updated_at FROM relay_push;
                DROP TABLE relay_push;
                """),
    ]

    private let database: any SQLDatabase
    private let logger: Logger

    init(database: any SQLDatabase, logger: Logger) throws {
        try database.migrate(component: "relay", migrations: Self.migrations)
        self.database = database
        self.logger = logger
    }

    private func run<T>(_ what: String, _ fallback: T, _ body: () throws -> T) -> T {
        do {
            return try body()
        } catch {
            logger.warning("relay push state unavailable", ["operation": what, "error": "\(error)"])
            return fallback
        }
    }

    func register(_ subject: RelaySubject, pushToken: Data) {
        guard !pushToken.isEmpty else { return }
        let key = SQLValue.blob(subject.rawRepresentation)
        run("register", ()) {
            try database.transaction { transaction in
                try transaction.execute(
                    "INSERT INTO relay_push_targets (subject, push_token, woken, updated_at) VALUES (?, ?, 0, ?) "
                        + "ON CONFLICT (subject, push_token) DO UPDATE SET updated_at = excluded.updated_at",
                    [key, .blob(pushToken), .integer(Int64(Date().timeIntervalSince1970))])
                // The latest targets are kept; a ghost of a device long gone makes room.
                try transaction.execute(
                    "DELETE FROM relay_push_targets WHERE subject = ? AND push_token NOT IN (SELECT push_token FROM "
                        + "relay_push_targets WHERE subject = ? ORDER BY updated_at DESC, push_token LIMIT ?)",
                    [key, key, .integer(Int64(Self.maximumTargetsPerSubject))])
            }
        }
    }

    func reconnected(_ subject: RelaySubject) {
        run("reconnected", ()) {
            try database.execute(
                "UPDATE relay_push_targets SET woken = 0 WHERE subject = ? AND woken = 1",
                [.blob(subject.rawRepresentation)])
        }
    }

    func failed(_ subject: RelaySubject, pushToken: Data) {
        run("failed", ()) {
            try database.execute(
                "UPDATE relay_push_targets SET woken = 0 WHERE subject = ? AND push_token = ?",
                [.blob(subject.rawRepresentation), .blob(pushToken)])
        }
    }

    func forget(_ subject: RelaySubject) {
        run("forget", ()) {
            try database.execute(
                "DELETE FROM relay_push_targets WHERE subject = ?", [.blob(subject.rawRepresentation)])
        }
    }

    func claim(_ subject: RelaySubject) -> PushClaim {
        run("claim", .unregistered) {
            let claimed = try database.query(
                "UPDATE relay_push_targets SET woken = 1 WHERE subject = ? AND woken = 0 RETURNING push_token",
                [.blob(subject.rawRepresentation)])
            if !claimed.isEmpty { return .push(try claimed.map { try $0.data("push_token") }) }
            let known = try database.queryOne(
                "SELECT woken FROM relay_push_targets WHERE subject = ? LIMIT 1", [.blob(subject.rawRepresentation)])
            return known == nil ? .unregistered : .deduplicated
        }
    }
}
