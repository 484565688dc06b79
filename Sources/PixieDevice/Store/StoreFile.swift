import Foundation
import PrivateFiles
import Storage
import Synchronization
import SystemCalls

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The files of a ``DeviceStore`` kept on disk (docs/pixie-device.md, "The store's files"), and the locks that let
/// an import put a whole new store in place of the live one while other `pixie` processes use it.
///
/// `store.sqlite` is the name every reader opens. Until the first import it is the SQLite file itself; an import
/// writes its new store as `store.sqlite.<16 hex digits>` beside it and then makes `store.sqlite` a symbolic link to
/// that file, replacing the link (or the first plain file) with `rename(2)`, which is atomic. Each generation thus
/// has its own name, and so its own `-wal` and `-shm` (SQLite names them after the file a link leads to): a
/// connection still open on the old store can never meet the new one's write-ahead log, nor delete it when it
/// closes, as it could if the new file took the old one's name.
///
/// Two `flock(2)` locks, on files beside the store, keep the move safe:
/// - `store.sqlite.lock`: every write holds it shared, from before it looks for the current file until it commits;
///   the move holds it exclusive while it copies the live store's rows in and swaps the link. So no write lands in
///   a store after its rows were copied, and every write after the move finds the new file.
/// - `store.sqlite.import-lock`: held exclusive (without waiting) by an import for its whole life, so two imports
///   into one store never race; the second is refused with the reason.
///
/// A reader needs no lock: it looks at the link before each read and reads whichever store it finds, whole.
final class StoreFile: Sendable {
    /// `store.sqlite`.
    let link: URL
    private let opened: Mutex<Opened>

    private struct Opened {
        /// The file `database` has open: the link's target, or the link's own path before the first import.
        var target: String
        var database: SQLiteDatabase
    }

    var directory: URL { link.deletingLastPathComponent() }

    /// What SQLite keeps beside a database file, named after it.
    static let sideFileSuffixes = ["-wal", "-shm", "-journal"]

    /// Opens the store at `link`, creating an empty one (mode 0600) if there is none.
    init(link: URL) throws {
        self.link = link
        let target = try Self.target(of: link)
        if target == link.path && !FileManager.default.fileExists(atPath: target) {
            // A log or lock left by a store that is gone must not be played into the new one.
            for suffix in Self.sideFileSuffixes { unlink(link.path + suffix) }
            // SQLite takes an empty file as an empty database; created here, it is this user's alone.
            try Self.io { () throws(PrivateFilesError) in try PrivateFiles.write(Data(), to: link) }
        } else if !FileManager.default.fileExists(atPath: target) {
            throw DeviceStoreError.unusable(
                "\(link.path) leads to \(target), which is missing: the store was moved or deleted by hand. Move "
                    + "\(link.path) away to start with an empty store (a sibling's snapshot can fill it again)")
        }
        opened = Mutex(Opened(target: target, database: try DeviceStore.open(target)))
    }

    /// The database of the store's current file, opened anew if an import (in this process or another) moved a new
    /// store into place since the last call. A read still running on the old store finishes there.
    ///
    /// Only ``init(link:)`` creates a store: a file that went between reading the link and opening it (an import
    /// moved another in and removed it, or the device signed out) is never opened anew as an empty store; the link
    /// is read again instead.
    func database() throws -> SQLiteDatabase {
        try opened.withLock { opened throws -> SQLiteDatabase in
            var attempt = 0
            while true {
                let target = try Self.target(of: link)
                if opened.target == target {
                    // Signed out in another process: say so rather than write into a file no one will open.
                    guard FileManager.default.fileExists(atPath: target) else { return try DeviceStore.open(target) }
                    return opened.database
                }
                do {
                    opened = Opened(target: target, database: try DeviceStore.open(target))
                    return opened.database
                } catch  where attempt < 3 && !FileManager.default.fileExists(atPath: target) {
                    attempt += 1
                }
            }
        }
    }

    /// The file `link` leads to now: its target, or its own path while it is a plain file (or absent).
    static func target(of link: URL) throws -> String {
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = buffer.withUnsafeMutableBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { readlink(link.path, $0.baseAddress!, $0.count - 1) }
        }
        guard count >= 0 else {
            if errno == EINVAL || errno == ENOENT { return link.path }
            throw DeviceStoreError.unusable("cannot read \(link.path): \(String(cString: strerror(errno)))")
        }
        let name = String(decoding: buffer[0..<count], as: UTF8.self)
        guard isGeneration(name, of: link) else {
            throw DeviceStoreError.unusable(
                "\(link.path) is a link to \(name), which pixie did not make (its stores are "
                    + "\(link.lastPathComponent).<16 hex digits>, beside it): move it away and put the store file there"
            )
        }
        return link.deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// Whether `name` is one of `link`'s generations: `<link's name>.` and 16 lowercase hex digits.
    static func isGeneration(_ name: String, of link: URL) -> Bool {
        let prefix = link.lastPathComponent + "."
        guard name.hasPrefix(prefix) else { return false }
        let digits = name.dropFirst(prefix.count)
        return digits.count == 16 && digits.allSatisfy { $0.isHexDigit && !$0.isUppercase }
    }

    /// A name for a new generation, beside the link.
    func newGeneration() -> URL {
        let digits = String(UInt64.random(in: .min ... .max), radix: 16)
        return directory.appendingPathComponent(
            link.lastPathComponent + "." + String(repeating: "0", count: 16 - digits.count) + digits)
    }

    // MARK: locks

    /// Runs `body` holding `store.sqlite.lock`: shared for a write, exclusive to move a new store into place.
    func withLock<T>(exclusive: Bool, _ body: () throws -> T) throws -> T {
        try Self.withLock(at: link, exclusive: exclusive, body)
    }

    static func withLock<T>(at link: URL, exclusive: Bool, _ body: () throws -> T) throws -> T {
        let descriptor = try openLock(link.path + ".lock")
        defer { close(descriptor) }
        guard retryingInterrupts({ flock(descriptor, exclusive ? LOCK_EX : LOCK_SH) }) == 0 else {
            throw DeviceStoreError.unusable("cannot lock \(link.path).lock: \(String(cString: strerror(errno)))")
        }
        return try body()
    }

    /// Takes `store.sqlite.import-lock` without waiting, and returns its descriptor (closing it lets go); throws
    /// when another import into this store holds it.
    func takeImportLock() throws -> Int32 {
        try Self.takeImportLock(
            at: link,
            busy: "another import into this store is running (a `pixie sync` or `pixie backup import` on this home): "
                + "let it finish, then try again")
    }

    /// ``takeImportLock()`` for the store at `link`, `busy` the reason when another import holds it.
    private static func takeImportLock(at link: URL, busy: String) throws -> Int32 {
        let path = link.path + ".import-lock"
        let descriptor = try openLock(path)
        guard retryingInterrupts({ flock(descriptor, LOCK_EX | LOCK_NB) }) == 0 else {
            let reason = errno == EWOULDBLOCK ? nil : String(cString: strerror(errno))
            close(descriptor)
            throw reason.map { DeviceStoreError.unusable("cannot lock \(path): \($0)") }
                ?? DeviceStoreError.conflict(busy)
        }
        return descriptor
    }

    private static func openLock(_ path: String) throws -> Int32 {
        let descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw DeviceStoreError.unusable("cannot open \(path): \(String(cString: strerror(errno)))")
        }
        return descriptor
    }

    // MARK: moving a store into place

    /// Points `store.sqlite` at `generation` (a whole store, already on the disk) with one `rename(2)`. Throws only
    /// if the rename did not happen. Call holding the lock exclusive.
    func pointLink(at generation: URL) throws {
        let next = link.path + ".next"
        unlink(next)
        guard symlink(generation.lastPathComponent, next) == 0 else {
            throw DeviceStoreError.unusable("cannot make the link \(next): \(String(cString: strerror(errno)))")
        }
        guard rename(next, link.path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(next)
            throw DeviceStoreError.unusable("cannot move the new store into \(link.path): \(reason)")
        }
    }

    /// After ``pointLink(at:)``: makes the rename durable (the directory's `fsync(2)`), then removes `old`, the store
    /// the link pointed at, with its `-wal` and `-shm` (every row of it is in the new one), and the plain
    /// `store.sqlite`'s `-wal` and `-shm` when that was the old store.
    func settle(replacing old: String) throws {
        try Self.io { () throws(PrivateFilesError) in try PrivateFiles.syncDirectory(directory) }
        for suffix in Self.sideFileSuffixes { unlink(old + suffix) }
        if old != link.path { unlink(old) }
    }

    /// Removes what a crashed import left: generations other than the current one. Call holding the import lock.
    /// And, once `store.sqlite` is a link, the plain store's `-wal` and `-shm` should a move have stopped before
    /// removing them.
    func removeLeftovers() throws {
        let target = try Self.target(of: link)
        if target != link.path {
            for suffix in Self.sideFileSuffixes { unlink(link.path + suffix) }
        }
        let current = URL(fileURLWithPath: target).lastPathComponent
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names {
            var base = Substring(name)
            for suffix in Self.sideFileSuffixes where base.hasSuffix(suffix) {
                base = base.dropLast(suffix.count)
            }
            if base != current && Self.isGeneration(String(base), of: link) {
                unlink(directory.appendingPathComponent(name).path)
            }
        }
    }

    /// Removes every file of the store, for erasing it: the link, each generation, their `-wal` and `-shm`, and what
    /// an import may have left; not the two lock files, which another process may hold. Refused while an import
    /// runs; waits for writes under way (the store's lock, exclusive).
    static func removeAll(link: URL) throws {
        let importLock = try takeImportLock(
            at: link,
            busy: "an import into this device's store is running (a `pixie sync` or `pixie backup import`): let it "
                + "finish or stop it, then try again")
        defer { close(importLock) }
        let directory = link.deletingLastPathComponent()
        let own = link.lastPathComponent
        try StoreFile.withLock(at: link, exclusive: true) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            for name in names where name == own || name.hasPrefix(own + "-") || name.hasPrefix(own + ".") {
                if name == own + ".lock" || name == own + ".import-lock" { continue }
                unlink(directory.appendingPathComponent(name).path)
            }
        }
    }

    static func io<T>(_ body: () throws(PrivateFilesError) -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw DeviceStoreError.unusable(error.reason)
        }
    }
}
