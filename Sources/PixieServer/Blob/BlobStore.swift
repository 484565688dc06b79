import Foundation
import SiblingsCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// Where blob-svc keeps the bytes of blobs; their records (size, hash, expiry) are in the database. A backend
/// holds bytes by blob_id and knows nothing of expiry or budgets.
///
/// ``LocalBlobStore`` (a directory) is the one this build has: on one machine `<data_dir>/blobs`, and for
/// several nodes a directory they all mount (`blob_dir`; docs/operations.md, "Several nodes"). An object store
/// (S3) would be another implementation of this protocol, touching nothing else.
public protocol BlobStore: Sendable {
    /// A new upload: its bytes are written as they arrive; nothing is readable until ``commit(_:as:)``.
    func beginUpload() throws -> any BlobUpload
    /// Makes what `upload` holds durable and readable as `blobID`.
    func commit(_ upload: any BlobUpload, as blobID: String) async throws
    /// Opens `blobID`'s bytes.
    func open(_ blobID: String) throws -> any BlobReader
    /// Removes `blobID`'s bytes, if any.
    func delete(_ blobID: String)
    /// Removes uploads abandoned midway and bytes no record claims (`isRecorded` is false), untouched for at
    /// least `age` (so that, in a store several nodes share, another node's upload in progress, or a blob whose
    /// record is being written, is never taken); returns how many.
    func removeOrphans(untouchedFor age: TimeInterval, isRecorded: (String) throws -> Bool) throws -> Int
}

/// An upload in progress (``BlobStore/beginUpload()``).
public protocol BlobUpload: AnyObject, Sendable {
    func write(_ data: Data) throws
    /// Forgets the upload: its bytes are removed.
    func abandon()
}

/// One blob's bytes, open for reading.
public protocol BlobReader: AnyObject {
    func size() throws -> Int64
    func seek(to offset: Int64) throws
    /// Up to `count` bytes from the current offset; empty at the end.
    func read(upTo count: Int) throws -> Data
    func close()
}

/// Blobs as files in a directory: `tmp/<32 hex>.part` while uploading, then renamed to `<blob_id>` once fsynced,
/// and the directory fsynced. Every operation is a POSIX call on a path, so the directory may be a shared mount
/// (NFS, EFS) that every node uses: a rename within it is atomic, and the orphan rule goes by age, not by what
/// one process has in flight.
public final class LocalBlobStore: BlobStore {
    public let directory: URL
    private var temporary: URL { directory.appendingPathComponent("tmp", isDirectory: true) }

    public init(directory: URL) { self.directory = directory }

    public func beginUpload() throws -> any BlobUpload {
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        let name = (0..<16).map { _ in UInt8.random(in: 0...255) }.hexString + ".part"
        let path = temporary.appendingPathComponent(name).path
        return LocalUpload(path: path, file: try BlobFile(creating: path))
    }

    public func commit(_ upload: any BlobUpload, as blobID: String) async throws {
        guard let upload = upload as? LocalUpload else {
            throw ServerError(.storage, "an upload of another blob store was committed to \(directory.path)")
        }
        try await upload.file.synchronizeAndClose()
        let finalPath = directory.appendingPathComponent(blobID).path
        guard rename(upload.path, finalPath) == 0 else {
            let reason = String(cString: strerror(errno))
            upload.abandon()
            throw ServerError(.storage, "cannot rename the upload into \(directory.path): \(reason)")
        }
        BlobFile.synchronizeDirectory(directory.path)
    }

    public func open(_ blobID: String) throws -> any BlobReader {
        try BlobFile(reading: directory.appendingPathComponent(blobID).path)
    }

    public func delete(_ blobID: String) {
        unlink(directory.appendingPathComponent(blobID).path)
    }

    public func removeOrphans(untouchedFor age: TimeInterval, isRecorded: (String) throws -> Bool) throws -> Int {
        let manager = FileManager.default
        let cutoff = Date().addingTimeInterval(-age)
        func untouched(_ url: URL) -> Bool {
            guard let modified = try? manager.attributesOfItem(atPath: url.path)[.modificationDate] as? Date else {
                return false
            }
            return modified <= cutoff
        }
        var removed = 0
        for name in (try? manager.contentsOfDirectory(atPath: temporary.path)) ?? [] {
            let url = temporary.appendingPathComponent(name)
            if untouched(url), unlink(url.path) == 0 { removed += 1 }
        }
        for name in (try? manager.contentsOfDirectory(atPath: directory.path)) ?? []
        where BlobService.isWellFormed(name) {
            let url = directory.appendingPathComponent(name)
            if untouched(url), try !isRecorded(name), unlink(url.path) == 0 { removed += 1 }
        }
        return removed
    }
}

/// An upload into `tmp/`.
final class LocalUpload: BlobUpload, @unchecked Sendable {
    // @unchecked: used by the one task that streams the upload.
    let path: String
    let file: BlobFile

    init(path: String, file: BlobFile) {
        self.path = path
        self.file = file
    }

    func write(_ data: Data) throws { try file.write(data) }

    func abandon() {
        file.close()
        unlink(path)
    }
}

extension BlobFile: BlobReader {}
