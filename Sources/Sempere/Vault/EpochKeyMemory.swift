import Age
import Foundation

/// Every epoch identity this device has held in a vault, kept outside the vault so that it can always read
/// again the notes it wrote itself: `<config>/vaults/<vault_id>.epoch-keys.age`, an age file to the device's
/// own identity (mode 0600), one `<recipient> <identity>` line per epoch key.
///
/// Why: a device writes under the key of the list it follows. If that list is later dropped (a takeover
/// that did not see it: "devices added there must be approved again"), its key is in no vault.json any
/// more, and without this the notes the device wrote under it would open for nobody. With it, the device
/// finds them on its next command and writes them again under the current key, as it does with any late
/// file (the guide: "Files it wrote under the old key are not lost: once it sees the change, it encrypts
/// them again under the new key"). It holds nothing the device's own wraps did not give it.
struct EpochKeyMemory {
    /// Recipient string → identity.
    private(set) var identities: [String: WrapIdentity] = [:]

    static func load(from url: URL, identity: any DeviceUnwrapKey) throws -> EpochKeyMemory {
        var memory = EpochKeyMemory()
        guard let plaintext = try DeviceLocalFile.open(url, identity: identity) else { return memory }
        for line in String(decoding: plaintext, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count == 2, let key = try? WrapIdentity(string: String(fields[1])) else { continue }
            memory.identities[String(fields[0])] = key
        }
        return memory
    }

    /// Adds what `keyring` holds; true when anything was new.
    mutating func remember(_ keyring: VaultKeyring) -> Bool {
        var added = false
        for identity in keyring.identities.values where identities[identity.recipientString] == nil {
            identities[identity.recipientString] = identity
            added = true
        }
        return added
    }

    func save(to url: URL, identity: any DeviceUnwrapKey) throws {
        let text = identities.keys.sorted().map { "\($0) \(identities[$0]!.string)\n" }.joined()
        try AtomicWrite.write(
            try Age.encrypt(Data(text.utf8), to: [identity.recipient]), to: url, mode: 0o600)
    }

    /// The identities no current key of `keyring` is.
    func others(than keyring: VaultKeyring) -> [WrapIdentity] {
        let current = Set(keyring.identities.values.map(\.recipientString))
        return identities.filter { !current.contains($0.key) }.map(\.value)
    }
}
