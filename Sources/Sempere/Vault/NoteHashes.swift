import Foundation
import SiblingsCrypto

/// The SHA-256 of each note file this device hashed, with the file's stat when it did
/// (``VaultFolder/statKey(_:)``), so that the record of an epoch that ends lists 10,000 files without
/// reading them, and without decrypting and decoding the whole ``NoteIndex`` (which holds every note's
/// text). A cache beside the index: `<config>/vaults/<vault_id>.note-hashes`, written whenever the
/// index is saved.
///
/// Not encrypted: it holds the note files' paths and the SHA-256 of their ciphertext, which anyone who
/// sees the synced folder can compute, and their stat (mode 0600, outside the vault). A file whose stat
/// differs, or that the cache does not name, is read and hashed again, so a stale or damaged cache costs
/// time, never a wrong record.
///
/// Format (docs/sempere-format.md, "The note hashes cache"): the line `sempere-note-hashes-v1\n`, then per
/// file a 2-byte big-endian path length, the path, a 1-byte stat length, the stat key, and the SHA-256 as
/// 64 lower-case hex digits.
public struct NoteHashes: Sendable {
    static let magic = Array("sempere-note-hashes-v1\n".utf8)

    struct Entry: Sendable, Equatable {
        var stat: String
        var sha256: String
    }

    var entries: [String: Entry]

    init(entries: [String: Entry] = [:]) { self.entries = entries }

    /// The hashes the index holds for files it could read (set-aside files are included: their bytes were
    /// hashed all the same).
    public init(_ index: NoteIndex) {
        var entries: [String: Entry] = [:]
        entries.reserveCapacity(index.entries.count)
        for (path, entry) in index.entries {
            guard let stat = entry.stat, !entry.sha256.isEmpty else { continue }
            entries[path] = Entry(stat: stat, sha256: entry.sha256)
        }
        self.entries = entries
    }

    /// The cache at `url`, or an empty one when there is none or it does not parse (it is only a cache).
    public static func load(from url: URL) -> NoteHashes {
        guard let data = FileManager.default.contents(atPath: url.path) else { return NoteHashes() }
        return (try? NoteHashes(parsing: data)) ?? NoteHashes()
    }

    struct Malformed: Error {}

    init(parsing data: Data) throws {
        var entries: [String: Entry] = [:]
        try data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard bytes.count >= Self.magic.count, bytes.prefix(Self.magic.count).elementsEqual(Self.magic) else {
                throw Malformed()
            }
            var at = Self.magic.count
            func take(_ count: Int) throws -> UnsafeBufferPointer<UInt8> {
                guard count <= bytes.count - at else { throw Malformed() }
                defer { at += count }
                return UnsafeBufferPointer(rebasing: bytes[at..<at + count])
            }
            while at < bytes.count {
                let length = try take(2)
                let path = String(decoding: try take(Int(length[0]) << 8 | Int(length[1])), as: UTF8.self)
                let statBytes = try take(Int(try take(1)[0]))
                guard statBytes.allSatisfy({ (48...58).contains($0) || $0 == 46 || $0 == 45 }) else {
                    throw Malformed()
                }
                let stat = String(decoding: statBytes, as: UTF8.self)
                let digest = try take(64)
                // Lower-case hex only, and a stat key of digits and separators: anything else is not this cache.
                guard digest.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
                    throw Malformed()
                }
                let sha256 = String(decoding: digest, as: UTF8.self)
                entries[path] = Entry(stat: stat, sha256: sha256)
            }
        }
        self.entries = entries
    }

    func encoded() -> Data {
        var out = Self.magic
        out.reserveCapacity(Self.magic.count + entries.count * 160)
        for (path, entry) in entries {
            let pathBytes = Array(path.utf8)
            let statBytes = Array(entry.stat.utf8)
            let digest = Array(entry.sha256.utf8)
            guard pathBytes.count <= 0xFFFF, statBytes.count <= 0xFF, digest.count == 64 else { continue }
            out.append(UInt8(pathBytes.count >> 8))
            out.append(UInt8(pathBytes.count & 0xFF))
            out += pathBytes
            out.append(UInt8(statBytes.count))
            out += statBytes
            out += digest
        }
        return Data(out)
    }

    /// Saves the cache atomically, readable only by its owner.
    public func save(to url: URL) throws {
        try AtomicWrite.write(encoded(), to: url, mode: 0o600)
    }

    /// The note files that exist now with their SHA-256, for the record of an epoch that ends: a file this
    /// cache hashed and whose stat is unchanged is not read again. Files that cannot be read are returned
    /// apart.
    public func references(folder: VaultFolder) throws -> (references: [VaultBody.NoteReference], unreadable: [String])
    {
        let files = try folder.noteFiles(withStat: true)
        var references: [VaultBody.NoteReference] = []
        references.reserveCapacity(files.count)
        var unreadable: [String] = []
        for (path, stat) in files {
            if let stat, let entry = entries[path], entry.stat == stat {
                references.append(VaultBody.NoteReference(path: path, sha256: entry.sha256))
                continue
            }
            do {
                references.append(
                    VaultBody.NoteReference(
                        path: path, sha256: SHA256.hash(data: try folder.readNote(at: path)).description))
            } catch {
                unreadable.append(path)
            }
        }
        return (references, unreadable)
    }
}
