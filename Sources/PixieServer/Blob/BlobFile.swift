import Dispatch
import Foundation
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// One open blob file (POSIX: `open`, `write`, `fsync`), owned by this object and closed once.
///
/// `@unchecked Sendable`: used by one task at a time (an upload or a download producer); the descriptor is
/// only closed through ``close()``, which is idempotent under the lock.
final class BlobFile: @unchecked Sendable {
    private var descriptor: Int32
    private let path: String
    private let lock = NSLock()

    /// Creates `path`, which must not exist, readable by the owner only.
    init(creating path: String) throws {
        self.path = path
        descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Self.failure("create", path) }
    }

    init(reading path: String) throws {
        self.path = path
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Self.failure("open", path) }
    }

    deinit { close() }

    func write(_ data: Data) throws {
        try data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < buffer.count {
                let written = retryingInterrupts {
                    Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                }
                if written < 0 { throw Self.failure("write", path) }
                offset += written
            }
        }
    }

    func read(upTo count: Int) throws -> Data {
        var data = Data(count: count)
        let got = try data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) -> Int in
            let got = retryingInterrupts { Glibc.read(descriptor, buffer.baseAddress!, count) }
            guard got >= 0 else { throw Self.failure("read", path) }
            return got
        }
        data.count = got
        return data
    }

    func seek(to offset: Int64) throws {
        guard lseek(descriptor, off_t(offset), SEEK_SET) == off_t(offset) else { throw Self.failure("seek", path) }
    }

    func size() throws -> Int64 {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw Self.failure("stat", path) }
        return Int64(info.st_size)
    }

    /// fsync on a dispatch thread (it can take seconds for GiBs), then close.
    func synchronizeAndClose() async throws {
        let descriptor = self.descriptor
        let ok = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            DispatchQueue.global().async { continuation.resume(returning: fsync(descriptor) == 0) }
        }
        guard ok else { throw Self.failure("fsync", path) }
        close()
    }

    func close() {
        lock.lock()
        defer { lock.unlock() }
        if descriptor >= 0 {
            _ = Glibc.close(descriptor)
            descriptor = -1
        }
    }

    /// fsyncs a directory so a rename into it survives a crash; best effort.
    static func synchronizeDirectory(_ path: String) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        _ = Glibc.close(descriptor)
    }

    static func failure(_ operation: String, _ path: String) -> ServerError {
        ServerError(.storage, "cannot \(operation) \(path): \(String(cString: strerror(errno)))")
    }
}
