import Foundation
import Storage
import Synchronization

/// A database whose statements fail on demand: every statement `failing` matches throws `busy`, as a store
/// whose disk or lock is gone would. Used to make one component's tables (the transparency log's, say)
/// unavailable while the rest works.
final class FaultyDatabase: SQLDatabase {
    let inner: any SQLDatabase
    private let rule = Mutex<(@Sendable (String) -> Bool)?>(nil)

    init(_ inner: any SQLDatabase) { self.inner = inner }

    /// From now on, statements whose SQL `matches` fail; nil lets everything through again.
    func fail(when matches: (@Sendable (String) -> Bool)?) { rule.withLock { $0 = matches } }

    func check(_ sql: String) throws {
        if let rule = rule.withLock({ $0 }), rule(sql) {
            throw StorageError(.busy, "injected failure for: \(sql.prefix(60))")
        }
    }

    func execute(_ sql: String, _ params: [SQLValue]) throws -> Int {
        try check(sql)
        return try inner.execute(sql, params)
    }

    func query(_ sql: String, _ params: [SQLValue]) throws -> [SQLRow] {
        try check(sql)
        return try inner.query(sql, params)
    }

    func queryOne(_ sql: String, _ params: [SQLValue]) throws -> SQLRow? {
        try check(sql)
        return try inner.queryOne(sql, params)
    }

    func transaction<T>(_ body: (any SQLTransaction) throws -> T) throws -> T {
        try inner.transaction { transaction in try body(FaultyTransaction(inner: transaction, database: self)) }
    }

    func transaction<T>(exclusive name: String, _ body: (any SQLTransaction) throws -> T) throws -> T {
        try inner.transaction(exclusive: name) { transaction in
            try body(FaultyTransaction(inner: transaction, database: self))
        }
    }

    func readTransaction<T>(_ body: (any SQLQuerying) throws -> T) throws -> T {
        try inner.readTransaction { transaction in try body(FaultyReads(inner: transaction, database: self)) }
    }

    func migrate(component: String, migrations: [Migration]) throws -> [Int] {
        try inner.migrate(component: component, migrations: migrations)
    }
}

private struct FaultyTransaction: SQLTransaction {
    let inner: any SQLTransaction
    let database: FaultyDatabase

    func execute(_ sql: String, _ params: [SQLValue]) throws -> Int {
        try database.check(sql)
        return try inner.execute(sql, params)
    }

    func query(_ sql: String, _ params: [SQLValue]) throws -> [SQLRow] {
        try database.check(sql)
        return try inner.query(sql, params)
    }

    func queryOne(_ sql: String, _ params: [SQLValue]) throws -> SQLRow? {
        try database.check(sql)
        return try inner.queryOne(sql, params)
    }

    func executeScript(_ sql: String) throws {
        try database.check(sql)
        try inner.executeScript(sql)
    }
}

private struct FaultyReads: SQLQuerying {
    let inner: any SQLQuerying
    let database: FaultyDatabase

    func execute(_ sql: String, _ params: [SQLValue]) throws -> Int {
        try database.check(sql)
        return try inner.execute(sql, params)
    }

    func query(_ sql: String, _ params: [SQLValue]) throws -> [SQLRow] {
        try database.check(sql)
        return try inner.query(sql, params)
    }

    func queryOne(_ sql: String, _ params: [SQLValue]) throws -> SQLRow? {
        try database.check(sql)
        return try inner.queryOne(sql, params)
    }
}
