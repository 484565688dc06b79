import Foundation
import PrivateFiles
import SiblingsCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// Atomic file replacement, used for everything Sempere writes (key files, vault.json, notes): a new
/// file beside the target, written, `fsync`ed, then renamed over it, so a crash or a sync client reading
/// at the wrong moment sees the old file or the new one, never half of one.
enum AtomicWrite {
    /// Writes `data` to `url` with permission bits `mode`.
    static func write(_ data: Data, to url: URL, mode: mode_t, durable: Bool = true) throws {
        do {
            try PrivateFiles.write(data, to: url, mode: mode, durable: durable)
        } catch {
            throw SempereError(error)
        }
    }

    /// Makes a batch of writes made with `durable: false` durable (everything on `directory`'s file system).
    static func syncFileSystem(containing directory: URL) throws {
        do {
            try PrivateFiles.syncFileSystem(containing: directory)
        } catch {
            throw SempereError(error)
        }
    }

    /// Makes renames and removals in `directory` durable.
    static func syncDirectory(_ directory: URL) throws {
        do {
            try PrivateFiles.syncDirectory(directory)
        } catch {
            throw SempereError(error)
        }
    }
}

extension SempereError {
    /// A private file that cannot be used: ``Code/insecureKeyStore`` when it is not private, ``Code/io`` otherwise.
    init(_ error: PrivateFilesError) {
        switch error {
        case .insecure(let reason): self.init(.insecureKeyStore, reason)
        case .io(let reason): self.init(.io, reason)
        }
    }
}
