import Foundation
import SiblingsCrypto

/// The list of the copies one Re-encrypt Everything wrote: `records/reencrypted-<m>.json`, written by home
/// beside vault.json before the vault.json that commits to it (``VaultBody/Reencryption``;
/// docs/sempere-format.md, "Re-encrypt Everything").
///
/// Each entry names a note by its author's path, the SHA-256 of the file home copied (the author's file, or
/// an earlier copy) and the SHA-256 of the copy under epoch *m*'s key. A copy opens as a note only when its
/// bytes are listed here: the epoch recipients are public, so anyone holding an old plaintext (a removed
/// device) could otherwise encrypt it to the new key. Canonical JSON, sorted by path:
///
///     {"epoch":5,"format":"sempere-reencrypted-v1","notes":[{"path":"notes/…","sha256":"…","source_sha256":"…"}],"vault_id":"…"}
public struct ReencryptionList: Sendable, Equatable {
    public static let format = "sempere-reencrypted-v1"

    public struct Entry: Codable, Sendable, Equatable {
        /// The author's path, `notes/<author>/<id>.age` (the copy is `reencrypted/<author>/<id>.age`).
        public var path: String
        /// SHA-256 of the copy's bytes.
        public var sha256: String
        /// SHA-256 of the file it was made from.
        public var sourceSHA256: String

        enum CodingKeys: String, CodingKey {
            case path, sha256, sourceSHA256 = "source_sha256"
        }

        public init(path: String, sha256: String, sourceSHA256: String) {
            self.path = path
            self.sha256 = sha256
            self.sourceSHA256 = sourceSHA256
        }
    }

    public let vaultID: String
    public let epoch: Int
    /// Sorted by path.
    public let notes: [Entry]
    /// The file's exact bytes.
    public let bytes: Data

    struct File: Codable {
        var format: String
        var vaultID: String
        var epoch: Int
        var notes: [Entry]

        enum CodingKeys: String, CodingKey {
            case format, vaultID = "vault_id", epoch, notes
        }
    }

    public init(vaultID: String, epoch: Int, notes: [Entry]) throws {
        let sorted = notes.sorted { $0.path < $1.path }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        self.vaultID = vaultID
        self.epoch = epoch
        self.notes = sorted
        bytes = try encoder.encode(File(format: Self.format, vaultID: vaultID, epoch: epoch, notes: sorted))
    }

    /// The list in `bytes`, checked against the record in vault.json that commits to it.
    package init(parsing bytes: Data, record: VaultBody.Reencryption, vaultID: String) throws {
        let name = Self.path(epoch: record.epoch)
        guard SHA256.hash(data: bytes).description == record.listSHA256 else {
            throw SempereError(
                .malformedVault,
                "\(name) is not the list vault.json commits to (its SHA-256 differs): it was altered or replaced")
        }
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: bytes)
        } catch {
            throw SempereError(.malformedVault, "\(name) does not parse: \(plainDescription(of: error))")
        }
        guard file.format == Self.format, file.vaultID == vaultID, file.epoch == record.epoch,
            file.notes.count == record.count
        else {
            throw SempereError(.malformedVault, "\(name) is not the list of this re-encryption")
        }
        self.vaultID = vaultID
        epoch = file.epoch
        notes = file.notes
        self.bytes = bytes
    }

    public var sha256: String { SHA256.hash(data: bytes).description }

    /// The list's path in the vault folder.
    public static func path(epoch: Int) -> String { "records/reencrypted-\(epoch).json" }

    /// Where home writes the copy of the note whose author's path is `path`.
    public static func copyPath(of path: String) -> String {
        path.hasPrefix("notes/") ? "reencrypted/" + path.dropFirst("notes/".count) : path
    }
}

/// The re-encryption lists a command needs, read from the vault folder on first use, checked against
/// vault.json's commitment, and kept for the rest of the command. A list that is missing or altered binds
/// nothing, so the copies it would vouch for are set aside, never trusted.
public final class ReencryptionLists: @unchecked Sendable {
    // @unchecked: the cache is only touched under the lock.
    private let folder: VaultFolder?
    private let records: [Int: VaultBody.Reencryption]
    private let vaultID: String
    private let lock = NSLock()
    private var cache: [Int: Result<[String: ReencryptionList.Entry], SempereError>] = [:]

    /// The lists that `vault` commits to, in `folder`'s records/.
    public init(folder: VaultFolder, vault: VaultBody) {
        self.folder = folder
        records = Dictionary(vault.reencryptions.map { ($0.epoch, $0) }, uniquingKeysWith: { $1 })
        vaultID = vault.vaultID
        cache = [:]
    }

    /// Lists held in memory (home right after it made one, or a test).
    public init(_ lists: [ReencryptionList] = [], vault: VaultBody? = nil) {
        folder = nil
        records = Dictionary(vault?.reencryptions.map { ($0.epoch, $0) } ?? [], uniquingKeysWith: { $1 })
        vaultID = vault?.vaultID ?? ""
        for list in lists {
            cache[list.epoch] = .success(Dictionary(list.notes.map { ($0.path, $0) }, uniquingKeysWith: { $1 }))
        }
    }

    /// The entry for the author's path `path` in the list of the re-encryption into `epoch`, if any.
    public func entry(path: String, epoch: Int) -> ReencryptionList.Entry? {
        (try? entries(epoch: epoch).get())?[path]
    }

    /// Whether the re-encryption into `epoch` lists a copy of `path` with these bytes.
    func binds(path: String, sha256: String, epoch: Int) -> Bool {
        entry(path: path, epoch: epoch)?.sha256 == sha256
    }

    /// Why the list of `epoch` cannot be used, if it cannot.
    public func problem(epoch: Int) -> SempereError? {
        if case .failure(let error) = entries(epoch: epoch) { return error }
        return nil
    }

    private func entries(epoch: Int) -> Result<[String: ReencryptionList.Entry], SempereError> {
        lock.lock()
        defer { lock.unlock() }
        if let cached = cache[epoch] { return cached }
        let result: Result<[String: ReencryptionList.Entry], SempereError>
        if let record = records[epoch], let folder {
            do {
                let list = try ReencryptionList(
                    parsing: try folder.read(ReencryptionList.path(epoch: epoch)), record: record, vaultID: vaultID)
                result = .success(Dictionary(list.notes.map { ($0.path, $0) }, uniquingKeysWith: { $1 }))
            } catch let error as SempereError {
                result = .failure(
                    error.code == .notFound
                        ? SempereError(
                            .notFound,
                            "the list of the notes home re-encrypted into epoch \(epoch) "
                                + "(\(ReencryptionList.path(epoch: epoch))) is missing") : error)
            } catch {
                result = .failure(SempereError(.io, plainDescription(of: error)))
            }
        } else {
            result = .success([:])
        }
        cache[epoch] = result
        return result
    }
}
