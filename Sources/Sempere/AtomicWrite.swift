import Foundation
import SiblingsCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// Atomic file replacement, used for everything Sempere writes (key files, vault.json, notes): a new
/// file beside the target, written, `fsync`ed, then renamed over it, so a crash or a sync client reading
/// at the wrong moment sees the old file or the new one, never half of one.
enum AtomicWrite {
    /// Writes `data` to `url` with permission bits `mode`.
    static func write(_ data: Data, to url: URL, mode: mode_t) throws {
        let directory = url.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(
            ".\(url.lastPathComponent).partial-\(SecureRandom.bytes(count: 8).hexString)")
        let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            throw SempereError(.io, "cannot create a file in \(directory.path): \(String(cString: strerror(errno)))")
        }
        var closed = false
        defer {
            if !closed { close(descriptor) }
            unlink(temporary.path)  // fails harmlessly once renamed
        }
        func fail(_ what: String) -> SempereError {
            SempereError(
                .io, "cannot \(what) \(temporary.path): \(String(cString: strerror(errno))) (is the disk full?)")
        }
        guard fchmod(descriptor, mode) == 0 else { throw fail("set the mode of") }
        var written = 0
        try data.withUnsafeBytes { buffer in
            while written < buffer.count {
                let count = Glibc.write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                if count < 0 {
                    if errno == EINTR { continue }
                    throw fail("write")
                }
                written += count
            }
        }
        guard fsync(descriptor) == 0 else { throw fail("sync") }
        closed = true
        guard close(descriptor) == 0 else { throw fail("close") }
        guard rename(temporary.path, url.path) == 0 else {
            throw SempereError(.io, "cannot move the new file to \(url.path): \(String(cString: strerror(errno)))")
        }
    }

    /// Makes renames and removals in `directory` durable.
    static func syncDirectory(_ directory: URL) throws {
        let descriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw SempereError(.io, "cannot open \(directory.path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw SempereError(.io, "cannot sync \(directory.path): \(String(cString: strerror(errno)))")
        }
    }
}
