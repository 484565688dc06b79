import Foundation
import PrivateFiles
import SiblingsCrypto

/// The seed's BackupService (000_e422bd9a7c930342.txt, "What do I know?"): the device's whole-store export, two
/// ways.
///
/// - ``exportRawPayload(includeSecrets:to:)`` and ``importRawPayload(_:)``: the unsealed snapshot
///   (``StoreSnapshot``) that the onboarding sync seals with ``BlobCrypto`` for one sibling. Only this path passes
///   `includeSecrets: true`, so provider API keys ride the same-account end-to-end channel and never a file.
/// - ``exportArchive(to:)`` and ``importArchive(from:)``: a `.pixie-archive` file sealed under the device's
///   BackupKey (``BackupKeyring``), which never holds secrets. On Apple platforms the seed resolves the key from
///   the Keychain, synchronised by iCloud Keychain; on Linux there is none, so `pixie backup-key export` and
///   `import` move it as a file.
///
/// Import is insert-if-absent by row id (by planID for plans), in one transaction that commits only once the
/// whole snapshot has been read and authenticated, so a re-import is a no-op and a failed one leaves nothing.
public struct BackupService: Sendable {
    public let store: DeviceStore

    public init(store: DeviceStore) { self.store = store }

    /// What an export wrote.
    public struct ExportSummary: Sendable, Equatable {
        /// Rows written, tombstones included.
        public var rows: Int
        /// Bytes of snapshot written.
        public var bytes: UInt64
    }

    /// What an import found and wrote.
    public struct ImportSummary: Sendable, Equatable {
        /// Rows in the snapshot.
        public var rows: Int
        /// Rows this store did not have, now written.
        public var inserted: Int
        /// Rows this store had already (by id), left as they were.
        public var present: Int
    }

    /// The categories in the order a snapshot holds them: conversations before their messages, and provider API
    /// keys only when asked for.
    static func categories(includeSecrets: Bool) -> [StoreCategory] {
        StoreCategory.allCases.filter { includeSecrets || !$0.isSecret }
    }

    /// The seed's snapshotPayload, written to `sink` in pieces of about 1 MiB as it is read from one consistent
    /// view of the store. `includeSecrets` adds the provider API keys; pass it only for the same-account sync.
    @discardableResult
    public func exportRawPayload(includeSecrets: Bool, to sink: (Data) throws -> Void) throws -> ExportSummary {
        var piece = StoreSnapshot.header(includeSecrets: includeSecrets)
        var summary = ExportSummary(rows: 0, bytes: 0)
        let flushAt = 1 << 20
        func flush() throws {
            summary.bytes += UInt64(piece.count)
            try sink(piece)
            piece.cleanse()
            piece = Data()
            piece.reserveCapacity(flushAt + (64 << 10))
        }
        try store.forEachRow(of: Self.categories(includeSecrets: includeSecrets)) { row in
            StoreSnapshot.append(row, to: &piece)
            summary.rows += 1
            if piece.count >= flushAt { try flush() }
        }
        piece += StoreSnapshot.end(rowCount: UInt64(summary.rows))
        try flush()
        return summary
    }

    /// Imports a snapshot whose pieces `source` hands to the `feed` it is given, in order, as one ``StoreImport``:
    /// written beside the live store and moved into place only when `source` returns and the snapshot's end record
    /// has been read. If `source` throws (a chunk that does not authenticate), or the snapshot is cut or damaged,
    /// nothing is kept.
    @discardableResult
    public func importRawPayload(_ source: (_ feed: (Data) throws -> Void) throws -> Void) throws -> ImportSummary {
        var load = SnapshotLoad(into: try StoreImport(into: store))
        try source { piece in try load.feed(piece) }
        return try load.commit()
    }
}

/// A snapshot's rows on their way into a ``StoreImport``, fed in pieces as they are opened: the summary counts as
/// they go, and nothing is kept until ``commit()`` finds the end record.
struct SnapshotLoad {
    private let target: StoreImport
    private var reader = StoreSnapshot.Reader()
    private var summary = BackupService.ImportSummary(rows: 0, inserted: 0, present: 0)

    init(into target: StoreImport) { self.target = target }

    mutating func feed(_ piece: Data) throws {
        let target = target
        var summary = summary
        defer { self.summary = summary }
        try reader.feed(piece) { row in
            summary.rows += 1
            if try target.insert(row) { summary.inserted += 1 } else { summary.present += 1 }
        }
    }

    /// Checks that the snapshot ended, and makes it the store; the rows the live store had already count as present.
    mutating func commit() throws -> BackupService.ImportSummary {
        try reader.finish()
        let kept = try target.commit()
        summary.inserted -= kept
        summary.present += kept
        return summary
    }

    /// Throws the rows away.
    func discard() { target.discard() }
}

// MARK: the archive

extension BackupService {
    /// The first bytes of a `.pixie-archive`.
    static let archiveMagic = Data("pixie/archive/v1".utf8)

    /// What ``exportArchive(to:)`` wrote.
    public struct ArchiveSummary: Sendable, Equatable {
        public var rows: Int
        /// The archive's size.
        public var bytes: UInt64
        /// The BackupKey it is sealed under (``BackupKeyring/Key/id``).
        public var keyID: String
    }

    /// Writes the store, without secrets, to a `.pixie-archive` at `url` (docs/pixie-protocol.md, "The archive"),
    /// sealed under this device's BackupKey (made if it has none yet). The file appears only whole, mode 0600, and
    /// an existing file is never replaced.
    @discardableResult
    public func exportArchive(to url: URL, keyring: BackupKeyring) throws -> ArchiveSummary {
        let backupKey = try keyring.ownKey()
        let output = try Self.io { () throws(PrivateFilesError) in try PrivateFiles.NewFile(url) }
        do {
            var sealer = BlobCrypto.Sealer()
            let header = Self.archiveMagic + backupKey.idBytes
            let wrapNonce = AES.GCM.Nonce()
            let wrapped = try AES.GCM.seal(
                sealer.key.withUnsafeBytes { Data($0) }, using: backupKey.key, nonce: wrapNonce, authenticating: header)
            try Self.io { () throws(PrivateFilesError) in try output.write(header + wrapped.combined! + sealer.nonce) }
            let summary = try exportRawPayload(includeSecrets: false) { piece in
                let sealed = try sealer.update(piece)
                try Self.io { () throws(PrivateFilesError) in try output.write(sealed) }
            }
            let last = try sealer.finalize()
            try Self.io { () throws(PrivateFilesError) in
                try output.write(last)
                try output.commit()
            }
            return ArchiveSummary(rows: summary.rows, bytes: output.byteCount, keyID: backupKey.id)
        } catch {
            output.abort()
            throw error
        }
    }

    /// Imports a `.pixie-archive` (insert-if-absent, as a sibling's snapshot). Throws
    /// ``BackupServiceError/missingBackupKey(_:)`` when this device does not hold the key it is sealed under, and
    /// imports nothing unless the whole file authenticates.
    @discardableResult
    public func importArchive(from url: URL, keyring: BackupKeyring) throws -> ImportSummary {
        let input = try Self.io { () throws(PrivateFilesError) in try PrivateFiles.FileReader(url) }
        let headerCount = Self.archiveMagic.count + BackupKeyring.Key.idByteCount
        let prefixCount = headerCount + 12 + 32 + 16 + 12
        let prefix = try Self.read(input, upTo: prefixCount)
        guard prefix.count == prefixCount, prefix.starts(with: Self.archiveMagic) else {
            throw BackupServiceError.malformed(
                "\(url.path) is not a .pixie-archive (it does not start with \"pixie/archive/v1\")")
        }
        let header = prefix.prefix(headerCount)
        let keyID = Data(header.suffix(BackupKeyring.Key.idByteCount))
        guard let backupKey = try keyring.key(idBytes: keyID) else {
            throw BackupServiceError.missingBackupKey(
                "\(url.path) is sealed under the BackupKey \(keyID.hexString), which this device does not hold. Bring "
                    + "it from the device that made the archive (`pixie backup-key export FILE` there, "
                    + "`pixie backup-key import FILE` here), then import again")
        }
        let wrapped = prefix.dropFirst(headerCount).prefix(12 + 32 + 16)
        let fileKey: SymmetricKey
        do {
            fileKey = SymmetricKey(
                data: try AES.GCM.open(
                    AES.GCM.SealedBox(combined: wrapped), using: backupKey.key, authenticating: header))
        } catch {
            throw BackupServiceError.tampered(
                "\(url.path)'s key does not open under BackupKey \(backupKey.id): the archive was altered")
        }
        let nonce = Data(prefix.suffix(12))
        return try importRawPayload { feed in
            var opener = try BlobCrypto.Opener(key: fileKey, nonce: nonce)
            while true {
                let piece = try Self.read(input, upTo: 1 << 20)
                if piece.isEmpty { break }
                try feed(try opener.update(piece))
            }
            try feed(try opener.finalize())
        }
    }

    static func read(_ input: PrivateFiles.FileReader, upTo count: Int) throws -> Data {
        try io { () throws(PrivateFilesError) in try input.read(upTo: count) }
    }

    /// Runs a file operation, its failure said as a BackupServiceError.
    static func io<T>(_ body: () throws(PrivateFilesError) -> T) throws(BackupServiceError) -> T {
        do {
            return try body()
        } catch {
            throw .io(error.reason)
        }
    }
}
