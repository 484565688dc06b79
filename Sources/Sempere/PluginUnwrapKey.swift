import Age
import Foundation
import SiblingsCrypto

/// A device's unwrap key held by an age plugin (C2SP age-plugin.md): on a YubiKey through age-plugin-yubikey, a TPM
/// through age-plugin-tpm, a Secure Enclave through age-plugin-se (docs/sempere-format.md, "An unwrap key in
/// hardware"). The key never enters this process: each unwrap runs the plugin, which asks the hardware, and each
/// wrap to it runs the plugin's recipient side.
///
/// The key store keeps the plugin's identity file, which names the key without holding it:
///
///     # recipient: age1yubikey1...
///     AGE-PLUGIN-YUBIKEY-1...
///
/// Plugin keys are classical (no plugin says it is post-quantum), so a post-quantum vault refuses them.
public struct PluginUnwrapKey: DeviceUnwrapKey {
    /// The plugin's identity.
    public let plugin: AgePluginIdentity
    /// The recipient that wraps to it, through the same plugin.
    public let pluginRecipient: AgePluginRecipient

    /// The recipient, whose plugin failures are ``SempereError/Code/keyUnavailable``.
    public var recipient: any AgeRecipient { Recipient(plugin: pluginRecipient) }
    public var recipientString: String { pluginRecipient.string }
    public var isPostQuantum: Bool { false }

    /// The identity file the key store keeps, which `age -d -i` also takes.
    public var identityFile: String { "# recipient: \(recipientString)\n\(plugin.string)\n" }

    /// Whether `text` is a plugin identity file (it has an `AGE-PLUGIN-` line) rather than an age secret key.
    static func isIdentityFile(_ text: String) -> Bool {
        lines(text).contains { !$0.hasPrefix("#") && $0.uppercased().hasPrefix("AGE-PLUGIN-") }
    }

    /// Reads an identity file as the plugins write them: one `AGE-PLUGIN-<NAME>-1...` line, and its recipient in a
    /// comment (`# recipient: age1...` as age-plugin-yubikey and age-plugin-tpm write it, or `# public key:` as
    /// age-plugin-se and age-keygen do).
    ///
    /// - Parameters:
    ///   - ui: how the plugin's requests (a PIN, "touch your key") reach the person.
    ///   - searchPath: the directories to find the plugin in, as `PATH` lists them; nil: this process's `PATH`.
    public init(identityFile text: String, ui: AgePluginUI = .unattended, searchPath: String? = nil) throws {
        let all = Self.lines(text)
        let keys = all.filter { !$0.hasPrefix("#") }
        guard keys.count == 1, keys[0].uppercased().hasPrefix("AGE-PLUGIN-") else {
            throw SempereError(
                .invalidSecret,
                "a plugin identity file holds exactly one AGE-PLUGIN-... line (this one has \(keys.count) lines "
                    + "that are not comments): give the file the plugin wrote, such as `age-plugin-yubikey "
                    + "--identity > key.txt`")
        }
        let recipients = all.compactMap { line -> String? in
            guard line.hasPrefix("#"), let colon = line.firstIndex(of: ":") else { return nil }
            let label = line[line.index(after: line.startIndex)..<colon].trimmingCharacters(in: .whitespaces)
            guard ["recipient", "public key"].contains(label.lowercased()) else { return nil }
            return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        guard let recipientString = recipients.first else {
            throw SempereError(
                .invalidSecret,
                "the plugin identity file does not say its recipient: add a line `# recipient: age1...` with the "
                    + "recipient the plugin printed for this key")
        }
        do {
            plugin = try AgePluginIdentity(string: keys[0], ui: ui, searchPath: searchPath)
            pluginRecipient = try AgePluginRecipient(string: recipientString, ui: ui, searchPath: searchPath)
        } catch let error as AgeError {
            throw SempereError(.invalidSecret, "the plugin identity file is not usable: \(error.reason)")
        }
        guard plugin.name == pluginRecipient.name else {
            throw SempereError(
                .invalidSecret,
                "the plugin identity file names two plugins: its key is age-plugin-\(plugin.name)'s and its "
                    + "recipient age-plugin-\(pluginRecipient.name)'s; give the file the plugin wrote")
        }
    }

    public func unwrap(stanzas: [AgeStanza]) throws -> SymmetricKey? {
        do {
            let key = try plugin.unwrap(stanzas: stanzas)
            KeyUnlocking.shared.pluginAnswers(worked: true)
            return key
        } catch let error as AgeError {
            // A wrong PIN is never tried again: what was typed for this run is forgotten.
            KeyUnlocking.shared.pluginAnswers(worked: false)
            throw Self.unavailable(error)
        }
    }

    /// Checks that the plugin and its key are there and agree: wraps a fresh key to the recipient and unwraps it.
    /// Run before a device starts using the key, so that a key that cannot be used is never one a vault wraps to.
    public func check() throws {
        let message = Data(SecureRandom.bytes(count: 16))
        let file: Data
        let opened: Data
        do {
            file = try Age.encrypt(message, to: [pluginRecipient])
            opened = try Age.decrypt(file, identities: [self])
        } catch let error as AgeError where error.code == .noMatchingIdentity {
            throw SempereError(
                .keyUnavailable,
                "age-plugin-\(plugin.name) cannot open what is wrapped to the recipient in the identity file: the "
                    + "recipient and the key do not belong together; give the file the plugin wrote for this key")
        } catch let error as AgeError {
            throw Self.unavailable(error)
        }
        guard opened == message else {
            throw SempereError(.keyUnavailable, "age-plugin-\(plugin.name) unwrapped a different key than it wrapped")
        }
    }

    static func unavailable(_ error: AgeError) -> SempereError {
        SempereError(
            .keyUnavailable,
            "this device's unwrap key is held by an age plugin that could not use it: \(error.reason). Nothing was "
                + "changed")
    }

    private struct Recipient: AgeRecipient {
        let plugin: AgePluginRecipient
        func wrap(fileKey: SymmetricKey) throws -> [AgeStanza] {
            do {
                return try plugin.wrap(fileKey: fileKey)
            } catch let error as AgeError {
                throw PluginUnwrapKey.unavailable(error)
            }
        }
    }

    private static func lines(_ text: String) -> [String] {
        text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}
