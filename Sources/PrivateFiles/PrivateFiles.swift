import Foundation
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// Files only this user can read, as a device keeps its secrets (Sempere's key store, a Pixie device's home):
/// a directory of mode 0700 that must be a real directory of this user's and closed to others, and files of
/// mode 0600 replaced atomically (a new file beside the target, written, `fsync`ed, renamed over it, the directory
/// synced), so a crash or a sync client reading at the wrong moment sees the old file or the new one.
///
/// Every refusal says what is wrong and how to fix it; `noun` names the thing for the person ("the key directory",
/// "the device's home").
public enum PrivateFiles {
    /// Creates `directory` and any missing parents with mode 0700; existing ones are left as they are.
    public static func createDirectory(_ directory: URL, noun: String) throws(PrivateFilesError) {
        var missing: [String] = []
        var path = directory.standardizedFileURL.path
        var info = stat()
        while lstat(path, &info) != 0 {
            guard errno == ENOENT else { throw .io("cannot look at \(path): \(String(cString: strerror(errno)))") }
            missing.append(path)
            path = (path as NSString).deletingLastPathComponent
        }
        for path in missing.reversed() where mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw .io(
                "cannot create \(noun) \(path): \(String(cString: strerror(errno))); check that its parent is yours "
                    + "and writable")
        }
    }

    /// Refuses a directory that is a symbolic link, not a directory, someone else's, or open to others.
    public static func checkDirectory(_ directory: URL, noun: String, remedy: String) throws(PrivateFilesError) {
        let path = directory.path
        var info = stat()
        guard lstat(path, &info) == 0 else {
            throw .io("cannot look at \(noun) \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw .insecure(
                "\(noun) \(path) is not a directory (it is a symbolic link or a file): move it away, so that a "
                    + "private directory can be made there")
        }
        guard info.st_uid == geteuid() else {
            throw .insecure(
                "\(noun) \(path) belongs to user id \(info.st_uid), not to you (\(geteuid())): \(remedy)")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw .insecure(
                "\(noun) \(path) is open to other users (mode \(String(info.st_mode & 0o777, radix: 8))): run "
                    + "`chmod 700 \(path)`; if others could read it, treat its keys as exposed")
        }
    }

    /// The file's contents, or nil if it does not exist; refuses a file that is a link, someone else's, or open to
    /// others. `noun` names what such a file is ("a key file").
    public static func read(_ url: URL, noun: String) throws(PrivateFilesError) -> Data? {
        let descriptor = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            if errno == ELOOP {
                throw .insecure("\(url.path) is a symbolic link: \(noun) must be a plain file; remove the link")
            }
            throw .io("cannot open \(url.path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw .io("cannot look at \(url.path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else {
            throw .insecure("\(url.path) is not a plain file of yours: \(noun) must be; move it away and restore it")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw .insecure(
                "\(url.path) is open to other users (mode \(String(info.st_mode & 0o777, radix: 8))): run "
                    + "`chmod 600 \(url.path)`; if others could read it, treat the key as exposed")
        }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { bytes in
                retryingInterrupts { Glibc.read(descriptor, bytes.baseAddress, bytes.count) }
            }
            if count == 0 { return data }
            if count < 0 {
                throw .io("cannot read \(url.path): \(String(cString: strerror(errno)))")
            }
            data.append(contentsOf: buffer[..<count])
        }
    }

    /// Writes `data` to `url` atomically, with permission bits `mode`. With `durable` false the data is not
    /// flushed before the rename (the rename is still atomic): the caller makes a batch of such writes durable
    /// at once with ``syncFileSystem(containing:)``, and until then a crash may leave any of them empty.
    public static func write(
        _ data: Data, to url: URL, mode: mode_t = 0o600, durable: Bool = true
    ) throws(PrivateFilesError) {
        let directory = url.deletingLastPathComponent()
        // O_EXCL makes the name safe to guess; the random part only keeps writers of one file apart.
        let temporary = directory.appendingPathComponent(
            ".\(url.lastPathComponent).partial-\(String(UInt64.random(in: .min ... .max), radix: 16))")
        let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            throw .io("cannot create a file in \(directory.path): \(String(cString: strerror(errno)))")
        }
        var closed = false
        defer {
            if !closed { close(descriptor) }
            unlink(temporary.path)  // fails harmlessly once renamed
        }
        func fail(_ what: String) -> PrivateFilesError {
            .io("cannot \(what) \(temporary.path): \(String(cString: strerror(errno))) (is the disk full?)")
        }
        guard fchmod(descriptor, mode) == 0 else { throw fail("set the mode of") }
        var written = 0
        var failed = false
        data.withUnsafeBytes { buffer in
            while written < buffer.count {
                let count = retryingInterrupts {
                    Glibc.write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                }
                if count < 0 {
                    failed = true
                    return
                }
                written += count
            }
        }
        guard !failed else { throw fail("write") }
        guard !durable || fsync(descriptor) == 0 else { throw fail("sync") }
        closed = true
        guard close(descriptor) == 0 else { throw fail("close") }
        guard rename(temporary.path, url.path) == 0 else {
            throw .io("cannot move the new file to \(url.path): \(String(cString: strerror(errno)))")
        }
    }

    /// Removes `url`; one that is already gone is fine.
    public static func remove(_ url: URL) throws(PrivateFilesError) {
        guard unlink(url.path) == 0 || errno == ENOENT else {
            throw .io("cannot remove \(url.path): \(String(cString: strerror(errno)))")
        }
    }

    /// Makes everything written so far durable, the batch of writes made with `durable: false` included:
    /// sync(2), which on Linux returns once the data is on disk (POSIX lets it return earlier: a port to
    /// another system syncs each file of the batch instead, F_FULLFSYNC on Apple platforms). One call for a
    /// batch costs one flush where a write each would cost one per file.
    public static func syncFileSystem(containing directory: URL) throws(PrivateFilesError) {
        _ = directory
        sync()
    }

    /// Runs `body` holding an exclusive `flock(2)` on the file at `url` (made 0600 if missing), so that two
    /// processes, or two threads of one, that change the same files run one after the other. Not re-entrant: a
    /// thread that asks again for a lock it holds waits for itself. `body`'s errors pass through; failing to take
    /// the lock is a ``PrivateFilesError/io(_:)``.
    public static func locked<T>(_ url: URL, _ body: () throws -> T) throws -> T {
        let descriptor = open(url.path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw PrivateFilesError.io("cannot open \(url.path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        guard retryingInterrupts({ flock(descriptor, LOCK_EX) }) == 0 else {
            throw PrivateFilesError.io("cannot lock \(url.path): \(String(cString: strerror(errno)))")
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }

    /// Makes renames and removals in `directory` durable.
    public static func syncDirectory(_ directory: URL) throws(PrivateFilesError) {
        let descriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .io("cannot open \(directory.path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw .io("cannot sync \(directory.path): \(String(cString: strerror(errno)))")
        }
    }
}

/// A private file or directory that cannot be used: not private (`insecure`), or an I/O failure.
public enum PrivateFilesError: Error, Sendable, Equatable, CustomStringConvertible {
    /// It is not private to this user: a link, someone else's, open to others.
    case insecure(String)
    case io(String)

    public var reason: String {
        switch self {
        case .insecure(let reason), .io(let reason): reason
        }
    }

    public var description: String { reason }
}
