import Age
import Foundation
import SiblingsCrypto

/// A device's own keys, made once when it creates or joins a vault and kept in its ``KeyStore``; they
/// never leave the device.
///
/// - ``signingKey``: the hybrid Ed25519 + ML-DSA-65 signing key (``HybridSignature``), stored as its
///   32-byte seed under ``signingKeyName``.
/// - ``identity``: the age identity that receives this device's wrap of the vault key: X25519, or the
///   post-quantum hybrid (mlkem768x25519) for post-quantum vaults. Stored as its age secret key string
///   (`AGE-SECRET-KEY-1...` / `AGE-SECRET-KEY-PQ-1...`) under ``ageIdentityName``, so `age -d -i` can
///   use it directly.
public struct DeviceKeys: Sendable {
    /// The key store name of the signing key's seed.
    public static let signingKeyName = "device-signing-key"
    /// The key store name of the age identity.
    public static let ageIdentityName = "device-age-identity"

    /// The device's signing key.
    public let signingKey: HybridSignature.PrivateKey
    /// The device's age identity, which receives its wraps of the vault key.
    public let identity: WrapIdentity

    /// The device's signing public key, as others see it.
    public var publicKey: HybridSignature.PublicKey { signingKey.publicKey }

    /// The device's id in a vault: the first 16 bytes of SHA-256 of its signing public key, in hex.
    public var id: String { VaultKeys.identifier(for: signingKey.publicKey) }

    public init(signingKey: HybridSignature.PrivateKey, identity: WrapIdentity) {
        self.signingKey = signingKey
        self.identity = identity
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
    public static func load(from store: some KeyStore) throws -> DeviceKeys? {
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
        // The signing key last: it names the device, so keys without it were never used anywhere
        // (``discardInterruptedSave(in:)``).
        try store.store(Data(identity.string.utf8), as: Self.ageIdentityName)
        try store.store(signingKey.seedRepresentation, as: Self.signingKeyName)
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
