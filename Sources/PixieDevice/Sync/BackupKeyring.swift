import Foundation
import PrivateFiles
import SiblingsCrypto

/// The BackupKeys a device holds (the seed's per-device BackupKey, which seals a `.pixie-archive`): its own, made
/// on the first archive export, and any it was given. On Apple platforms the seed resolves the key from the
/// Keychain and iCloud Keychain carries it to the user's other devices; Linux has neither, so the key moves as a
/// file the person carries (``exportKey(to:)``, ``importKey(from:)``), and an archive names the key it needs by
/// its ``Key/id``.
///
/// Kept in the device's home as `backup-keys.json` (mode 0600): `{"keys": [{"key": base64url, "own": bool}]}`.
public struct BackupKeyring: Sendable {
    /// One BackupKey: 32 random bytes, and the id an archive names it by.
    public struct Key: Sendable {
        public static let idByteCount = 8
        public let key: SymmetricKey
        /// The first 8 bytes of SHA-256("pixie/backup-key-id/v1" ‖ key): names the key without revealing it.
        public let idBytes: Data
        /// ``idBytes`` in hex, as `pixie` shows it.
        public var id: String { idBytes.hexString }

        init(key: SymmetricKey) {
            self.key = key
            let digest = key.withUnsafeBytes { SHA256.hash(data: Data("pixie/backup-key-id/v1".utf8) + Data($0)) }
            idBytes = Data(Data(digest).prefix(Self.idByteCount))
        }
    }

    public let file: URL

    public init(home: DeviceHome) { file = home.directory.appendingPathComponent("backup-keys.json") }

    private struct Stored: Codable {
        struct Entry: Codable {
            var key: String
            var own: Bool
        }
        var keys: [Entry]
    }

    private func load() throws -> [(key: Key, own: Bool)] {
        let data: Data?
        do {
            data = try PrivateFiles.read(file, noun: "a BackupKey file")
        } catch {
            throw BackupServiceError.io(error.reason)
        }
        guard let data else { return [] }
        guard let stored = try? JSONDecoder().decode(Stored.self, from: data),
            let keys = Optional(
                stored.keys.compactMap { entry -> (Key, Bool)? in
                    guard let bytes = Data(base64URLEncoded: entry.key), bytes.count == 32 else { return nil }
                    return (Key(key: SymmetricKey(data: bytes)), entry.own)
                }), keys.count == stored.keys.count
        else {
            throw BackupServiceError.io(
                "\(file.path) is damaged: it is not the list of BackupKeys this version writes. Restore it from a "
                    + "backup; without it, archives sealed under its keys cannot be opened")
        }
        return keys
    }

    private func save(_ keys: [(key: Key, own: Bool)]) throws {
        let stored = Stored(
            keys: keys.map { entry in
                Stored.Entry(key: entry.key.key.withUnsafeBytes { Data($0) }.base64URLEncodedString(), own: entry.own)
            })
        do {
            try PrivateFiles.write(try JSONEncoder().encode(stored), to: file)
        } catch let error as PrivateFilesError {
            throw BackupServiceError.io(error.reason)
        }
    }

    /// Every key this device holds, its own first.
    public var keys: [Key] {
        get throws { try load().sorted { $0.own && !$1.own }.map(\.key) }
    }

    /// This device's own key, made (and saved) if it has none yet.
    public func ownKey() throws -> Key {
        var keys = try load()
        if let own = keys.first(where: \.own) { return own.key }
        let key = Key(key: SymmetricKey(size: .bits256))
        keys.insert((key, true), at: 0)
        try save(keys)
        return key
    }

    /// Makes `bytes` this device's own key, for archives made from now on (a rotation's BackupKey, docs/pixie-protocol.md,
    /// "Revoking a device"); the key that was its own stays, to open the archives made with it.
    public func adoptOwnKey(_ bytes: Data) throws {
        let key = Key(key: SymmetricKey(data: bytes))
        var keys = try load().filter { $0.key.idBytes != key.idBytes }.map { ($0.key, false) }
        keys.insert((key, true), at: 0)
        try save(keys)
    }

    /// The key named `idBytes`, if this device holds it.
    public func key(idBytes: Data) throws -> Key? {
        try load().first { $0.key.idBytes == idBytes }?.key
    }

    static let fileLine = "pixie-backup-key-v1:"

    /// Writes this device's own key (made if needed) to a new file at `url` (mode 0600, never over an existing
    /// file), for the person to carry to another device. Whoever holds the file can open this device's archives.
    @discardableResult
    public func exportKey(to url: URL) throws -> Key {
        let key = try ownKey()
        let text =
            "# A Pixie BackupKey (id \(key.id)). It opens .pixie-archive files made with it: keep it as secret as they\n"
            + "# are, and bring it in with `pixie backup-key import FILE`.\n"
            + Self.fileLine + key.key.withUnsafeBytes { Data($0) }.base64URLEncodedString() + "\n"
        do {
            let output = try PrivateFiles.NewFile(url)
            try output.write(Data(text.utf8))
            try output.commit()
        } catch {
            throw BackupServiceError.io(error.reason)
        }
        return key
    }

    /// Adds the key in the file at `url` (written by ``exportKey(to:)``); returns it, and whether it was new here.
    @discardableResult
    public func importKey(from url: URL) throws -> (key: Key, added: Bool) {
        let data: Data?
        do {
            data = try PrivateFiles.read(url, noun: "a BackupKey file")
        } catch {
            throw BackupServiceError.io(error.reason)
        }
        guard let data else { throw BackupServiceError.io("there is no file \(url.path)") }
        let lines = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline)
            .filter { !$0.hasPrefix("#") && !$0.allSatisfy(\.isWhitespace) }
        guard lines.count == 1, lines[0].hasPrefix(Self.fileLine),
            let bytes = Data(base64URLEncoded: String(lines[0].dropFirst(Self.fileLine.count))), bytes.count == 32
        else {
            throw BackupServiceError.malformed(
                "\(url.path) is not a BackupKey file (one line \"\(Self.fileLine)...\", as `pixie backup-key export` "
                    + "writes)")
        }
        let key = Key(key: SymmetricKey(data: bytes))
        var keys = try load()
        guard !keys.contains(where: { $0.key.idBytes == key.idBytes }) else { return (key, false) }
        keys.append((key, false))
        try save(keys)
        return (key, true)
    }
}
