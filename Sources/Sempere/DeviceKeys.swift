import Age
import Foundation
import SiblingsCrypto

/// What a device's signing key does: sign. The key store's keys are operations, not bytes, so a key held where
/// it cannot be read (a Secure Enclave, a token) can stand behind one; ``HybridSignature/PrivateKey`` is the key in
/// software.
public protocol DeviceSigningKey: Sendable {
    /// The public key others check its signatures with.
    var publicKey: HybridSignature.PublicKey { get }
    /// A hybrid Ed25519 + ML-DSA-65 signature of `message` in `context` (``HybridSignature``).
    func signature(for message: some DataProtocol, context: some DataProtocol) throws -> HybridSignature.Signature
}

extension HybridSignature.PrivateKey: DeviceSigningKey {}

/// What a device's unwrap key does: open what is wrapped to it (an age identity), and say the recipient to wrap
/// to. ``WrapIdentity`` is the key in software; ``PluginUnwrapKey`` one held by an age plugin (a YubiKey, a TPM, a
/// Secure Enclave).
public protocol DeviceUnwrapKey: AgeIdentity {
    /// The recipient that wraps to this key.
    var recipient: any AgeRecipient { get }
    /// That recipient as a string (`age1...`, `age1pq1...`, `age1<plugin>1...`): the device's `wrap_recipient`.
    var recipientString: String { get }
    /// Whether the key is post-quantum (mlkem768x25519), which a post-quantum vault requires.
    var isPostQuantum: Bool { get }
}

extension DeviceUnwrapKey {
    /// The key as an age identity, to pass to `Age.decrypt(_:identities:)`.
    public var ageIdentity: any AgeIdentity { self }
}

extension WrapIdentity: DeviceUnwrapKey {
    public func unwrap(stanzas: [AgeStanza]) throws -> SymmetricKey? {
        switch self {
        case .x25519(let identity): return try identity.unwrap(stanzas: stanzas)
        case .hybrid(let identity): return try identity.unwrap(stanzas: stanzas)
        }
    }
}

/// A device's own keys, made once when it creates or joins a vault and kept in its ``KeyStore``; they
/// never leave the device.
///
/// - ``signingKey``: the hybrid Ed25519 + ML-DSA-65 signing key (``HybridSignature``), stored as its
///   32-byte seed under ``signingKeyName``.
/// - ``identity``: the key that receives this device's wrap of the vault key. In software it is an age identity,
///   X25519 or, for post-quantum vaults, the hybrid (mlkem768x25519), stored as its age secret key string
///   (`AGE-SECRET-KEY-1...` / `AGE-SECRET-KEY-PQ-1...`) under ``ageIdentityName``, so `age -d -i` can use it
///   directly. Held by an age plugin (``PluginUnwrapKey``), the store keeps the plugin's identity file instead (a
///   handle, not the key), which `age -d -i` also uses.
public struct DeviceKeys: Sendable {
    /// The key store name of the signing key's seed.
    public static let signingKeyName = "device-signing-key"
    /// The key store name of the age identity.
    public static let ageIdentityName = "device-age-identity"

    /// The device's signing key.
    public let signingKey: any DeviceSigningKey
    /// The device's unwrap key, which receives its wraps of the vault key.
    public let identity: any DeviceUnwrapKey
    /// What the key store holds for these keys, by name: what ``save(to:)`` writes.
    let records: [String: Data]

    /// The device's signing public key, as others see it.
    public var publicKey: HybridSignature.PublicKey { signingKey.publicKey }

    /// The device's id in a vault: the first 16 bytes of SHA-256 of its signing public key, in hex.
    public var id: String { VaultKeys.identifier(for: signingKey.publicKey) }

    /// Keys in software.
    public init(signingKey: HybridSignature.PrivateKey, identity: WrapIdentity) {
        self.init(signingKey: signingKey, identity: identity, identityRecord: Data(identity.string.utf8))
    }

    /// A signing key in software and an unwrap key an age plugin holds.
    public init(signingKey: HybridSignature.PrivateKey, identity: PluginUnwrapKey) {
        self.init(signingKey: signingKey, identity: identity, identityRecord: Data(identity.identityFile.utf8))
    }

    /// Keys that something other than the key store holds, such as a signing key in a Secure Enclave: this device
    /// uses them through their operations, and their holder keeps them (``save(to:)`` refuses).
    public init(signingKey: any DeviceSigningKey, identity: any DeviceUnwrapKey) {
        self.signingKey = signingKey
        self.identity = identity
        records = [:]
    }

    private init(signingKey: HybridSignature.PrivateKey, identity: any DeviceUnwrapKey, identityRecord: Data) {
        self.signingKey = signingKey
        self.identity = identity
        records = [Self.signingKeyName: signingKey.seedRepresentation, Self.ageIdentityName: identityRecord]
    }

    /// New random keys; `postQuantum` chooses the hybrid age identity.
    public static func generate(postQuantum: Bool) -> DeviceKeys {
        DeviceKeys(
            signingKey: HybridSignature.PrivateKey(),
            identity: .generate(postQuantum: postQuantum))
    }

    /// The keys in `store`, or nil when it holds none.
    ///
    /// - Throws: ``SempereError/Code/invalidSecret`` when only one of the two keys is there, or one is
    ///   not a key of its kind; the key store's own errors (such as a wrong passphrase).
    /// - Parameter pluginUI: how an age plugin that holds the unwrap key reaches the person.
    public static func load(from store: some KeyStore, pluginUI: AgePluginUI = .unattended) throws -> DeviceKeys? {
        let seed = try store.load(signingKeyName)
        let text = try store.load(ageIdentityName)
        guard let seed, let text else {
            if seed == nil, text == nil { return nil }
            let missing = seed == nil ? signingKeyName : ageIdentityName
            throw SempereError(
                .invalidSecret,
                "this device's keys are incomplete: \"\(missing)\" is missing from the key store. Restore it from "
                    + "a backup; if it is lost, remove this device from the vault and join again")
        }
        let signingKey: HybridSignature.PrivateKey
        do {
            signingKey = try HybridSignature.PrivateKey(seedRepresentation: seed)
        } catch {
            throw SempereError(
                .invalidSecret,
                "\"\(signingKeyName)\" is not a \(HybridSignature.seedByteCount)-byte signing key seed "
                    + "(\(seed.count) bytes): the key store is damaged; restore it from a backup")
        }
        let string = String(decoding: text, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if PluginUnwrapKey.isIdentityFile(string) {
            return DeviceKeys(signingKey: signingKey, identity: try PluginUnwrapKey(identityFile: string, ui: pluginUI))
        }
        let identity: WrapIdentity
        do {
            identity = try WrapIdentity(string: string)
        } catch {
            throw SempereError(
                .invalidSecret,
                "\"\(ageIdentityName)\" is not an age secret key: the key store is damaged; restore it from a backup")
        }
        return DeviceKeys(signingKey: signingKey, identity: identity)
    }

    /// Saves the keys in `store`. Keys are made once: this refuses to replace keys already there.
    ///
    /// - Throws: ``SempereError/Code/alreadyExists`` when the store holds either key.
    public func save(to store: some KeyStore) throws {
        for name in [Self.signingKeyName, Self.ageIdentityName] where try store.load(name) != nil {
            throw SempereError(
                .alreadyExists,
                "this device already has keys (\"\(name)\" is in the key store): a device makes its keys once; "
                    + "remove the device from its vault before deleting them")
        }
        try write(to: store)
    }

    /// Writes the keys' records into `store`, replacing what is there (``save(to:)``, or a new passphrase). The
    /// signing key last: it names the device, so keys without it were never used anywhere
    /// (``discardInterruptedSave(in:)``).
    func write(to store: some KeyStore) throws {
        guard records.count == 2 else {
            throw SempereError(
                .invalidSecret,
                "these keys are held outside the key store (made with init(signingKey:identity:) from operations), "
                    + "so it cannot keep them: their holder does")
        }
        for name in [Self.ageIdentityName, Self.signingKeyName] {
            guard let record = records[name] else { continue }
            try store.store(record, as: name)
        }
    }

    /// A ``save(to:)`` that stopped between its two writes (a crash, a kill) leaves an age identity with no
    /// signing key. Such keys were never used: the signing key is written last and names the device. Call
    /// this only when the device is in no vault; it then removes the lone identity so that keys can be
    /// made, and returns whether it did.
    static func discardInterruptedSave(in store: some KeyStore) throws -> Bool {
        guard try store.load(signingKeyName) == nil, try store.load(ageIdentityName) != nil else { return false }
        try store.delete(ageIdentityName)
        return true
    }

    /// The keys in `store`, made and saved there first if it holds none.
    public static func loadOrCreate(in store: some KeyStore, postQuantum: Bool) throws -> DeviceKeys {
        if let keys = try load(from: store) { return keys }
        let keys = generate(postQuantum: postQuantum)
        try keys.save(to: store)
        return keys
    }
}
