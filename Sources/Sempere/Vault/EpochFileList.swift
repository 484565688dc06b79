import Foundation
import SiblingsCrypto

/// The list of note files that existed when an epoch ended: `records/epoch-<n>.json`, written by home
/// beside vault.json before the vault.json that commits to it (docs/sempere-format.md, "Records").
///
/// vault.json's record holds only this file's SHA-256 and count, so vault.json stays a few kilobytes at
/// 10,000 notes, and a command reads a list only when it meets a note whose author has since been
/// removed. The bytes are canonical JSON (sorted keys, no whitespace, notes sorted by path):
///
///     {"epoch":1,"format":"sempere-epoch-files-v1","notes":[{"path":"notes/…","sha256":"…"}],"vault_id":"…"}
public struct EpochFileList: Sendable, Equatable {
    public static let format = "sempere-epoch-files-v1"

    public let vaultID: String
    public let epoch: Int
    /// Sorted by path.
    public let notes: [VaultBody.NoteReference]
    /// The file's exact bytes.
    public let bytes: Data

    struct File: Codable {
        var format: String
        var vaultID: String
        var epoch: Int
        var notes: [VaultBody.NoteReference]

        enum CodingKeys: String, CodingKey {
            case format, vaultID = "vault_id", epoch, notes
        }
    }

    public init(vaultID: String, epoch: Int, notes: [VaultBody.NoteReference]) throws {
        // Usually in order already (``VaultFolder/notePaths()`` sorts): checked in one pass.
        let inOrder = zip(notes, notes.dropFirst()).allSatisfy { $0.path < $1.path }
        let sorted = inOrder ? notes : notes.sorted { $0.path < $1.path }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        self.vaultID = vaultID
        self.epoch = epoch
        self.notes = sorted
        self.bytes =
            try Self.plainJSON(vaultID: vaultID, epoch: epoch, notes: sorted)
            ?? encoder.encode(File(format: Self.format, vaultID: vaultID, epoch: epoch, notes: sorted))
    }

    /// The bytes `JSONEncoder` with sorted keys and unescaped slashes gives for the list, written directly
    /// (10,000 entries in a few milliseconds, against about 50 with the encoder), when no string needs
    /// escaping: note paths and digests are hex, "/" and ".age". Nil otherwise, for the encoder to write.
    static func plainJSON(vaultID: String, epoch: Int, notes: [VaultBody.NoteReference]) -> Data? {
        func isPlain(_ text: String) -> Bool {
            let plain = { (byte: UInt8) in byte >= 0x20 && byte < 0x7F && byte != 0x22 && byte != 0x5C }  // not " or \\
            return text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(plain) } ?? text.utf8.allSatisfy(plain)
        }
        guard isPlain(vaultID), notes.allSatisfy({ isPlain($0.path) && isPlain($0.sha256) }) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(128 + notes.count * 140)
        out += Array("{\"epoch\":\(epoch),\"format\":\"\(Self.format)\",\"notes\":[".utf8)
        let (open, middle, close) = (Array("{\"path\":\"".utf8), Array("\",\"sha256\":\"".utf8), Array("\"}".utf8))
        for (index, note) in notes.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out += open
            out += note.path.utf8
            out += middle
            out += note.sha256.utf8
            out += close
        }
        out += Array("],\"vault_id\":\"".utf8)
        out += vaultID.utf8
        out += Array("\"}".utf8)
        return Data(out)
    }

    /// The list in `bytes`, checked against the record that commits to it.
    package init(parsing bytes: Data, record: VaultBody.Record, vaultID: String) throws {
        guard let expected = record.notesSHA256, SHA256.hash(data: bytes).description == expected else {
            throw SempereError(
                .malformedVault,
                "\(Self.path(epoch: record.epoch)) is not the list vault.json commits to (its SHA-256 differs): it "
                    + "was altered or replaced")
        }
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: bytes)
        } catch {
            throw SempereError(
                .malformedVault, "\(Self.path(epoch: record.epoch)) does not parse: \(plainDescription(of: error))")
        }
        guard file.format == Self.format, file.vaultID == vaultID, file.epoch == record.epoch else {
            throw SempereError(.malformedVault, "\(Self.path(epoch: record.epoch)) is not this epoch's list")
        }
        self.vaultID = vaultID
        self.epoch = file.epoch
        self.notes = file.notes
        self.bytes = bytes
    }

    public var sha256: String { SHA256.hash(data: bytes).description }

    /// The list's path in the vault folder.
    public static func path(epoch: Int) -> String { "records/epoch-\(epoch).json" }
}

/// The epochs' file lists as one command needs them: read from the vault folder on first use, checked
/// against vault.json's commitment, and kept for the rest of the command. A list that is missing or
/// altered answers with the error, so the notes that depend on it are set aside, never trusted.
public final class EpochFileLists: @unchecked Sendable {
    // @unchecked: the cache is only touched under the lock.
    private let folder: VaultFolder?
    private let given: [Int: EpochFileList]
    private let lock = NSLock()
    private var cache: [Int: Result<Set<String>, any Error>] = [:]

    /// The lists in `folder`'s records/.
    public init(folder: VaultFolder) {
        self.folder = folder
        self.given = [:]
    }

    /// Lists held in memory (a test, or home right after it made them).
    public init(_ lists: [EpochFileList] = []) {
        self.folder = nil
        self.given = Dictionary(lists.map { ($0.epoch, $0) }, uniquingKeysWith: { $1 })
    }

    /// Whether the record of `record.epoch` lists the note file `path` with this SHA-256.
    func contains(path: String, sha256: String, record: VaultBody.Record, vaultID: String) throws -> Bool {
        if let inline = record.notes { return inline.contains { $0.path == path && $0.sha256 == sha256 } }
        lock.lock()
        defer { lock.unlock() }
        if cache[record.epoch] == nil {
            cache[record.epoch] = Result {
                Set(try list(record: record, vaultID: vaultID).notes.map { $0.path + "\u{0}" + $0.sha256 })
            }
        }
        return try cache[record.epoch]!.get().contains(path + "\u{0}" + sha256)
    }

    /// Every path the record of `record.epoch` lists.
    func paths(record: VaultBody.Record, vaultID: String) throws -> [String] {
        if let inline = record.notes { return inline.map(\.path) }
        return try list(record: record, vaultID: vaultID).notes.map(\.path)
    }

    private func list(record: VaultBody.Record, vaultID: String) throws -> EpochFileList {
        let bytes: Data
        if let folder {
            let path = EpochFileList.path(epoch: record.epoch)
            guard FileManager.default.fileExists(atPath: folder.url.appendingPathComponent(path).path) else {
                throw SempereError(
                    .notFound,
                    "the record of the notes that existed at the end of epoch \(record.epoch) (\(path)) is missing")
            }
            do {
                bytes = try folder.read(path)
            } catch {
                // There and not readable: not something waiting for sync.
                throw SempereError(
                    .io,
                    "the record of the notes that existed at the end of epoch \(record.epoch) (\(path)) cannot be "
                        + "read: check its permissions")
            }
        } else if let list = given[record.epoch] {
            bytes = list.bytes
        } else {
            throw SempereError(.notFound, "the record of the notes of epoch \(record.epoch) is not at hand")
        }
        return try EpochFileList(parsing: bytes, record: record, vaultID: vaultID)
    }
}
