import Foundation
import PrivateFiles

#if canImport(Glibc)
    import Glibc
#endif

/// What a device remembers about one vault, outside the vault folder and next to its key store: where
/// the folder is and the pin of the newest device list it has accepted (``VaultPin``). Nothing here is
/// secret; the device's keys stay in its ``KeyStore``.
///
/// One JSON file per vault, `<config>/vaults/<vault_id>.json`, written atomically with mode 0600 in a
/// 0700 directory (the pin is not secret, but another user must not be able to roll it back).
public struct DeviceState: Codable, Sendable, Equatable {
    public static let format = "sempere-device-state-v1"

    public var format: String
    /// The vault folder, as an absolute path.
    public var folder: String
    /// The newest device list this device has accepted.
    public var pin: VaultPin
    /// The current epoch (its recipient) and the number of re-encryptions when this device last went over
    /// its own notes (`"<recipient>:<count>"`): a change since makes the next command do it (late files, old copies).
    public var notesTidiedAt: String?
    /// Warnings shown on every command until the person acknowledges them (`sempere alerts --ack`): a takeover of
    /// the vault that another device made. Nil when there are none.
    public var alerts: [Alert]?

    /// A warning that stays until acknowledged.
    public struct Alert: Codable, Sendable, Equatable {
        /// What it is about, so that one event raises one alert (`takeover-<generation>`).
        public var id: String
        public var text: String
        /// When this device first saw it, Unix seconds.
        public var raisedAt: Int64

        enum CodingKeys: String, CodingKey {
            case id, text, raisedAt = "raised_at"
        }
    }

    /// Adds `alert` unless one with its id is there already.
    mutating func raise(_ alert: Alert) {
        guard !(alerts ?? []).contains(where: { $0.id == alert.id }) else { return }
        alerts = (alerts ?? []) + [alert]
    }

    public init(folder: String, pin: VaultPin) {
        self.format = Self.format
        self.folder = folder
        self.pin = pin
    }

    public var vaultID: String { pin.vaultID }

    /// The configuration root: `override` (a `--config` option) if given, else `$SEMPERE_CONFIG`, else
    /// `$XDG_CONFIG_HOME/sempere` (absolute only, as XDG says), else `$HOME/.config/sempere`.
    public static func configRoot(override: String?, environment: [String: String]) throws -> URL {
        func absolute(_ path: String) -> URL {
            path.hasPrefix("/")
                ? URL(fileURLWithPath: path)
                : URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(path)
        }
        if let override, !override.isEmpty { return absolute(override).standardizedFileURL }
        if let config = environment["SEMPERE_CONFIG"], !config.isEmpty { return absolute(config).standardizedFileURL }
        return try FileKeyStore.defaultDirectory(environment: environment).deletingLastPathComponent()
    }

    /// The key store of the device whose configuration root is `root`: `<root>/keys`.
    public static func keyStoreDirectory(root: URL) -> URL { root.appendingPathComponent("keys") }

    static func directory(root: URL) -> URL { root.appendingPathComponent("vaults") }

    static func file(root: URL, vaultID: String) -> URL {
        directory(root: root).appendingPathComponent("\(vaultID).json")
    }

    /// Where this device keeps its encrypted ``NoteIndex`` of the vault: `<root>/vaults/<vault_id>.notes.age`.
    public func noteIndexFile(root: URL) -> URL {
        Self.directory(root: root).appendingPathComponent("\(vaultID).notes.age")
    }

    /// Where this device keeps its ``NoteHashes`` of the vault's note files:
    /// `<root>/vaults/<vault_id>.note-hashes`.
    public func noteHashesFile(root: URL) -> URL {
        Self.directory(root: root).appendingPathComponent("\(vaultID).note-hashes")
    }

    /// Where this device keeps every epoch key it has held in the vault (``EpochKeyMemory``):
    /// `<root>/vaults/<vault_id>.epoch-keys.age`.
    public func epochKeysFile(root: URL) -> URL {
        Self.directory(root: root).appendingPathComponent("\(vaultID).epoch-keys.age")
    }

    /// Where home journals the copies a re-encryption into `epoch` has made durable:
    /// `<root>/vaults/<vault_id>.reencrypt-<epoch>.journal`.
    public func reencryptJournalFile(root: URL, epoch: Int) -> URL {
        Self.directory(root: root).appendingPathComponent("\(vaultID).reencrypt-\(epoch).journal")
    }

    /// Where this device keeps the newest manifest it accepted from each listed device (``NoteManifest``):
    /// `<root>/vaults/<vault_id>.manifests/<device_id>.json`.
    public func manifestCopiesDirectory(root: URL) -> URL {
        Self.directory(root: root).appendingPathComponent("\(vaultID).manifests")
    }

    /// Where this device keeps a copy of the newest vault.json it accepted,
    /// `<root>/vaults/<vault_id>.vault.json`: home puts it back when vault.json is deleted from the folder,
    /// and every device can say what happened (not secret: the same bytes as the synced file).
    public func vaultCopyFile(root: URL) -> URL {
        Self.directory(root: root).appendingPathComponent("\(vaultID).vault.json")
    }

    /// Where this device keeps the notes it removed, restorable for 30 days: `<root>/vaults/<vault_id>.trash/`.
    public func trashDirectory(root: URL) -> URL {
        Self.directory(root: root).appendingPathComponent("\(vaultID).trash")
    }

    /// The lock every command that changes this device's files of the vault holds (``VaultSession``):
    /// `<root>/vaults/<vault_id>.lock`.
    public func lockFile(root: URL) -> URL {
        Self.directory(root: root).appendingPathComponent("\(vaultID).lock")
    }

    /// Runs `body` holding this vault's lock on this device, so that two `sempere` processes (or two sessions
    /// in one app) that each read this device's signed manifest, change it and write it do so one after the
    /// other, and neither's change is lost. Re-entrant on one thread: a locked step that calls another runs it
    /// under the same lock.
    func locked<T>(root: URL, _ body: () throws -> T) throws -> T {
        let file = lockFile(root: root)
        let key = "sempere.lock:\(file.path)"
        let held = Thread.current.threadDictionary
        if held[key] != nil { return try body() }
        do {
            try PrivateFiles.createDirectory(Self.directory(root: root), noun: "the vault state directory")
            return try PrivateFiles.locked(file) {
                held[key] = true
                defer { held.removeObject(forKey: key) }
                return try body()
            }
        } catch let error as PrivateFilesError {
            throw SempereError(error)
        }
    }

    /// Saves the state as `<root>/vaults/<vault_id>.json`.
    public func save(root: URL) throws {
        let directory = Self.directory(root: root)
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw SempereError(.io, "cannot create \(directory.path): \(plainCreateFailure(at: directory, error))")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        try AtomicWrite.write(try encoder.encode(self), to: Self.file(root: root, vaultID: vaultID), mode: 0o600)
    }

    /// The state of every vault this device is in, sorted by folder.
    public static func all(root: URL) throws -> [DeviceState] {
        let directory = directory(root: root)
        guard FileManager.default.fileExists(atPath: directory.path) else { return [] }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw SempereError(.io, "cannot list \(directory.path): \(plainDescription(of: error))")
        }
        return try names.filter { $0.hasSuffix(".json") && !$0.hasSuffix(".vault.json") && !$0.hasPrefix(".") }.map {
            name in
            try load(directory.appendingPathComponent(name))
        }.sorted { $0.folder < $1.folder }
    }

    static func load(_ file: URL) throws -> DeviceState {
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw SempereError(.io, "cannot read \(file.path)")
        }
        let state: DeviceState
        do {
            state = try JSONDecoder().decode(DeviceState.self, from: data)
        } catch {
            throw SempereError(
                .invalidEncoding,
                "\(file.path) does not parse (\(plainDescription(of: error))): restore it, or join the vault again")
        }
        guard state.format == Self.format, file.lastPathComponent == "\(state.vaultID).json" else {
            throw SempereError(
                .invalidEncoding, "\(file.path) is not a Sempere device state of \(Self.format) for its vault")
        }
        return state
    }

    /// The state of the vault in `folder` when given (matched by path), else the only vault this device
    /// is in.
    public static func find(root: URL, folder: String?) throws -> DeviceState {
        let states = try all(root: root)
        if let folder {
            let wanted = URL(fileURLWithPath: folder).standardizedFileURL.resolvingSymlinksInPath().path
            guard
                let state = states.first(where: {
                    URL(fileURLWithPath: $0.folder).standardizedFileURL.resolvingSymlinksInPath().path == wanted
                })
            else {
                throw SempereError(
                    .notFound,
                    "this device is not in a vault at \(folder): create one with `sempere create`, or join with "
                        + "`sempere join`")
            }
            return state
        }
        switch states.count {
        case 0:
            throw SempereError(
                .notFound,
                "this device is in no vault yet (config \(root.path)): `sempere create <folder> --name <device>` "
                    + "makes one, `sempere join <folder> --name <device>` joins one")
        case 1:
            return states[0]
        default:
            throw SempereError(
                .notFound,
                "this device is in \(states.count) vaults (\(states.map(\.folder).joined(separator: ", "))): "
                    + "say which with --vault <folder>")
        }
    }
}
