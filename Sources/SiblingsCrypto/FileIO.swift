import Foundation

/// File reads that report failures as ``CryptoError``s naming the file.
enum FileIO {
    static func openForReading(_ url: URL) throws -> FileHandle {
        do {
            return try FileHandle(forReadingFrom: url)
        } catch {
            throw CryptoError(.io, "cannot open \(url.path) for reading: \(error.localizedDescription)")
        }
    }

    static func size(_ handle: FileHandle, of url: URL) throws -> UInt64 {
        do {
            let end = try handle.seekToEnd()
            try handle.seek(toOffset: 0)
            return end
        } catch {
            throw CryptoError(.io, "cannot find the size of \(url.path): \(error.localizedDescription)")
        }
    }

    /// Up to `count` bytes, or nil at the end of the file.
    static func read(_ handle: FileHandle, upTo count: Int, from url: URL) throws -> Data? {
        do {
            guard let data = try handle.read(upToCount: count), !data.isEmpty else { return nil }
            return data
        } catch {
            throw CryptoError(.io, "cannot read \(url.path): \(error.localizedDescription)")
        }
    }
}

/// A file that appears at its path only when complete: written to a private temporary file in the
/// same directory (mode 0600), synced, then renamed over the destination; removed on ``abort()``.
final class AtomicFile {
    let destination: URL
    let temporary: URL
    private let handle: FileHandle
    private var finished = false

    init(_ destination: URL) throws {
        self.destination = destination
        let directory = destination.deletingLastPathComponent()
        temporary = directory.appendingPathComponent(
            ".\(destination.lastPathComponent).partial-\(SecureRandom.bytes(count: 8).hexString)")
        guard
            FileManager.default.createFile(
                atPath: temporary.path, contents: nil, attributes: [.posixPermissions: 0o600])
        else {
            throw CryptoError(.io, "cannot create a file in \(directory.path): check that it exists and is writable")
        }
        do {
            handle = try FileHandle(forWritingTo: temporary)
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw CryptoError(.io, "cannot write \(temporary.path): \(error.localizedDescription)")
        }
    }

    func write(_ data: Data) throws {
        do {
            try handle.write(contentsOf: data)
        } catch {
            throw CryptoError(.io, "cannot write \(temporary.path): \(error.localizedDescription) (is the disk full?)")
        }
    }

    func commit() throws {
        do {
            try handle.synchronize()
            try handle.close()
            finished = true
            guard rename(temporary.path, destination.path) == 0 else {
                let reason = String(cString: strerror(errno))
                try? FileManager.default.removeItem(at: temporary)
                throw CryptoError(.io, "cannot move the finished file to \(destination.path): \(reason)")
            }
        } catch let error as CryptoError {
            throw error
        } catch {
            abort()
            throw CryptoError(.io, "cannot finish \(destination.path): \(error.localizedDescription)")
        }
    }

    func abort() {
        if !finished {
            try? handle.close()
            finished = true
        }
        try? FileManager.default.removeItem(at: temporary)
    }

    deinit {
        if !finished { abort() }
    }
}
