import Foundation

/// What goes wrong while a store is exported, sealed, carried or absorbed, or archived, with what to do (the seed's
/// BackupServiceError, which names ``missingBackupKey(_:)``).
public enum BackupServiceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes are not what was sealed: a SHA-256 that is not the offer's, a chunk that does not authenticate, a
    /// blob or archive cut or extended. Nothing was imported.
    case tampered(String)
    /// The snapshot or archive opened, but is not one this version reads (a newer format, or damaged inside).
    case malformed(String)
    /// An argument out of its range (a key of the wrong size).
    case invalid(String)
    /// The store could not be read or written while exporting or importing; the import was rolled back.
    case store(String)
    /// A file could not be read or written.
    case io(String)
    /// The archive is sealed under a BackupKey this device does not hold (the seed: on a fresh device the user must
    /// wait for the key, or bring it).
    case missingBackupKey(String)

    public var description: String {
        switch self {
        case .tampered(let reason), .malformed(let reason), .invalid(let reason), .store(let reason),
            .io(let reason), .missingBackupKey(let reason):
            reason
        }
    }
}
