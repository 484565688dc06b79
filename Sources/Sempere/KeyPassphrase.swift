import Age
import Foundation
import Synchronization

/// A passphrase for this device's own keys (docs/sempere-format.md, "A passphrase for the device's keys").
///
/// With one, both keys sit in the key store as age scrypt files (``FileKeyStore``, as `age -p` writes them), so
/// a thief who copies the configuration directory gets nothing without the passphrase. There is no agent: a
/// process asks for the passphrase at most once for each device (through the provider it set with
/// ``askForKeyPassphrase(_:)``), keeps the opened keys in its memory only, and forgets them when it ends, so
/// each `sempere` command asks again.
extension VaultSession {
    /// The shortest passphrase accepted for a device's keys. The key files stay on the device (not in the synced
    /// folder, unlike the kit's passphrase copy), so a guesser needs the device's disk first; ten characters
    /// still keep a stolen disk out of a common-password list's reach at a second of scrypt a guess.
    public static let minimumKeyPassphraseLength = 10

    /// Sets how this process asks for the passphrase of a device's keys when they have one (a terminal prompt,
    /// an app's dialog). Without a provider, protected keys are refused with an error that says so.
    public static func askForKeyPassphrase(_ provider: @escaping @Sendable () throws -> String) {
        KeyUnlocking.shared.state.withLock { $0.provider = provider }
    }

    /// Protects the keys this process makes from now on (``create(folder:homeName:postQuantum:passphrase:configRoot:)``,
    /// ``askToJoin(folder:name:configRoot:now:)``, a takeover from nothing but the kit) with `passphrase`.
    public static func protectNewKeys(with passphrase: String) throws {
        try checkKeyPassphrase(passphrase)
        KeyUnlocking.shared.state.withLock { $0.newKeys = passphrase }
    }

    /// Whether the keys of the device at `configRoot` are protected by a passphrase.
    public static func keysAreProtected(configRoot: URL) throws -> Bool {
        let directory = DeviceState.keyStoreDirectory(root: configRoot)
        return [DeviceKeys.signingKeyName, DeviceKeys.ageIdentityName].contains {
            FileManager.default.fileExists(atPath: directory.appendingPathComponent("\($0).age").path)
        }
    }

    /// Adds, changes (`passphrase` new) or removes (`passphrase` nil) the passphrase of this device's keys. The
    /// keys themselves do not change: only how they are stored. Opening them first asks for the current
    /// passphrase, when they have one.
    public static func setKeyPassphrase(configRoot: URL, to passphrase: String?) throws {
        if let passphrase { try checkKeyPassphrase(passphrase) }
        guard let keys = try loadKeys(configRoot: configRoot) else {
            throw SempereError(.notFound, "this device has no keys yet: run `sempere create` or `sempere join` first")
        }
        let directory = DeviceState.keyStoreDirectory(root: configRoot)
        let store = try FileKeyStore(directory: directory, passphrase: passphrase)
        // Each key is written in its new form, then its old form removed (``FileKeyStore/store(_:as:)``): a stop
        // half way leaves one of each, which the passphrase given here opens, and running this again finishes.
        try keys.write(to: store)
        KeyUnlocking.shared.state.withLock { $0.opened[directory.path] = (keys, passphrase) }
    }

    static func checkKeyPassphrase(_ passphrase: String) throws {
        guard passphrase.count >= minimumKeyPassphraseLength else {
            throw SempereError(
                .weakPassphrase,
                "a passphrase for this device's keys needs at least \(minimumKeyPassphraseLength) characters (this one "
                    + "has \(passphrase.count)): three random words, or a sentence only you know, will do")
        }
    }

    /// This device's keys from its key store (nil when it has none), opened with the passphrase this process knows
    /// for them, or asked for once through ``askForKeyPassphrase(_:)`` when they are protected.
    static func loadKeys(configRoot: URL) throws -> DeviceKeys? {
        let directory = DeviceState.keyStoreDirectory(root: configRoot)
        if let (keys, _) = KeyUnlocking.shared.state.withLock({ $0.opened[directory.path] }) { return keys }
        do {
            let ui = KeyUnlocking.shared.state.withLock { $0.pluginUI }
            guard let keys = try DeviceKeys.load(from: try keyStore(configRoot: configRoot), pluginUI: ui) else {
                return nil
            }
            KeyUnlocking.shared.state.withLock { $0.opened[directory.path] = (keys, $0.newKeys) }
            return keys
        } catch let error as SempereError where error.code == .passphraseRequired {
            guard let provider = KeyUnlocking.shared.state.withLock({ $0.provider }) else {
                throw SempereError(
                    .passphraseRequired,
                    "this device's keys (in \(directory.path)) are protected by a passphrase, and this program has no "
                        + "way to ask for it")
            }
            let passphrase = try provider()
            do {
                let ui = KeyUnlocking.shared.state.withLock { $0.pluginUI }
                guard
                    let keys = try DeviceKeys.load(
                        from: try FileKeyStore(directory: directory, passphrase: passphrase), pluginUI: ui)
                else { return nil }
                KeyUnlocking.shared.state.withLock { $0.opened[directory.path] = (keys, passphrase) }
                return keys
            } catch let error as SempereError where error.code == .wrongPassphrase {
                throw SempereError(
                    .wrongPassphrase,
                    "that passphrase does not open this device's keys (in \(directory.path)): nothing was done; check "
                        + "it and run the command again")
            }
        }
    }
}

/// What this process knows of device keys' passphrases: the provider that asks, the passphrase for keys it
/// makes, and the keys it has opened, by key store directory (its memory only, for as long as it runs).
final class KeyUnlocking: Sendable {
    struct State {
        var provider: (@Sendable () throws -> String)?
        var newKeys: String?
        var opened: [String: (keys: DeviceKeys, passphrase: String?)] = [:]
        /// How an age plugin holding a device's unwrap key reaches the person.
        var pluginUI: AgePluginUI = .unattended
        /// The plugin key the keys this process makes take as their unwrap key.
        var newUnwrapKey: PluginUnwrapKey?
        /// What the person answered to a plugin's secret requests, by request, in a run of the plugin that worked
        /// (kept), and in the run under way (pending).
        var pluginAnswers: [String: String] = [:]
        var pendingPluginAnswers: [String: String] = [:]
    }

    /// After a run of the plugin: keeps what was answered in it when it worked, forgets it when it did not.
    func pluginAnswers(worked: Bool) {
        state.withLock { state in
            if worked { state.pluginAnswers.merge(state.pendingPluginAnswers) { $1 } }
            state.pendingPluginAnswers = [:]
        }
    }

    static let shared = KeyUnlocking()
    let state = Mutex(State())

    /// The passphrase to store (and open) the keys in `directory` with: the one they were opened with, else the
    /// one for new keys.
    func passphrase(for directory: String) -> String? {
        state.withLock { $0.opened[directory]?.passphrase ?? $0.newKeys }
    }

    /// Forgets what this process opened (the keys in `directory` were dropped or made again).
    func forget(_ directory: String) {
        _ = state.withLock { $0.opened.removeValue(forKey: directory) }
    }
}
