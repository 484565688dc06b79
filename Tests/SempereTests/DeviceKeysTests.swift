import Age
import Foundation
import Sempere
import SiblingsCrypto
import Synchronization
import Testing

@Suite struct DeviceKeysTests {
    @Test(arguments: [false, true])
    func createdOnceThenLoaded(postQuantum: Bool) throws {
        let store = InMemoryKeyStore()
        #expect(try DeviceKeys.load(from: store) == nil)
        let keys = try DeviceKeys.loadOrCreate(in: store, postQuantum: postQuantum)
        #expect(keys.identity.isPostQuantum == postQuantum)
        #expect(try store.list() == [DeviceKeys.ageIdentityName, DeviceKeys.signingKeyName].sorted())
        #expect(try store.load(DeviceKeys.signingKeyName)?.count == HybridSignature.seedByteCount)

        // A second call, even asking for the other kind, loads the same keys.
        let again = try DeviceKeys.loadOrCreate(in: store, postQuantum: !postQuantum)
        #expect(again.publicKey == keys.publicKey)
        #expect(again.identity.recipientString == keys.identity.recipientString)
        #expect(again.identity.isPostQuantum == postQuantum)

        // The loaded keys work: a signature verifies, a wrap opens.
        let message = Data("device list".utf8)
        let signature = try again.signingKey.signature(for: message, context: Data())
        #expect(keys.publicKey.isValidSignature(signature, for: message, context: Data()))
        let file = try Age.encrypt(message, to: [keys.identity.recipient])
        #expect(try Age.decrypt(file, identities: [again.identity.ageIdentity]) == message)

        // Made once: saving other keys over them is refused.
        expectSempereError(.alreadyExists) { try DeviceKeys.generate(postQuantum: postQuantum).save(to: store) }
    }

    /// A signing key that holds no bytes anyone can read, as one in a Secure Enclave: it only signs.
    final class SealedSigner: DeviceSigningKey {
        private let key = HybridSignature.PrivateKey()
        let signatures = Mutex(0)
        var publicKey: HybridSignature.PublicKey { key.publicKey }
        func signature(for message: some DataProtocol, context: some DataProtocol) throws -> HybridSignature.Signature {
            signatures.withLock { $0 += 1 }
            return try key.signature(for: message, context: context)
        }
    }

    @Test("the keys are operations: a signer that only signs (as a hardware key) makes a vault others check")
    func keysAreOperations() throws {
        let signer = SealedSigner()
        let keys = DeviceKeys(signingKey: signer, identity: WrapIdentity.generate(postQuantum: false))
        let (vault, _, pin) = try VaultHome.createVault(homeName: "Laptop", credentials: keys, postQuantum: false)
        #expect(signer.signatures.withLock { $0 } == 1)
        // Checked as any device checks it: the signature is home's, over the body.
        let parsed = try SignedVault(parsing: try vault.encoded())
        _ = try parsed.accept(pinned: pin)
        #expect(parsed.body.home == keys.id && parsed.signer == keys.id)
        // Its holder keeps such keys; the key store cannot.
        expectSempereError(.invalidSecret) { try keys.save(to: InMemoryKeyStore()) }
    }

    @Test func theAgeIdentityIsAnAgeKey() throws {
        let store = InMemoryKeyStore()
        let keys = try DeviceKeys.loadOrCreate(in: store, postQuantum: false)
        let text = String(decoding: try #require(try store.load(DeviceKeys.ageIdentityName)), as: UTF8.self)
        #expect(text.hasPrefix("AGE-SECRET-KEY-1"))
        let identities = try AgeKeyFile.identities(from: text)
        #expect(identities.count == 1)
        let file = try Age.encrypt(Data("x".utf8), to: [keys.identity.recipient])
        #expect(try Age.decrypt(file, identities: identities) == Data("x".utf8))
    }

    @Test func inAPassphraseProtectedFileStore() throws {
        try KeyStoreTests.withFileStore(passphrase: "device passphrase") { store, _ in
            let keys = try DeviceKeys.loadOrCreate(in: store, postQuantum: true)
            let loaded = try #require(try DeviceKeys.load(from: store))
            #expect(loaded.publicKey == keys.publicKey)
            #expect(loaded.identity.recipientString.hasPrefix("age1pq1"))
            let wrong = try FileKeyStore(directory: store.directory, passphrase: "nope", workFactor: 10)
            expectSempereError(.wrongPassphrase) { try DeviceKeys.load(from: wrong) }
        }
    }

    @Test func damagedOrIncompleteKeys() throws {
        let store = InMemoryKeyStore()
        _ = try DeviceKeys.loadOrCreate(in: store, postQuantum: false)
        let seed = try #require(try store.load(DeviceKeys.signingKeyName))

        try store.store(seed.prefix(31), as: DeviceKeys.signingKeyName)
        expectSempereError(.invalidSecret) { try DeviceKeys.load(from: store) }
        try store.store(seed, as: DeviceKeys.signingKeyName)

        let identity = try #require(try store.load(DeviceKeys.ageIdentityName))
        try store.store(Data("AGE-SECRET-KEY-1NOTAKEY".utf8), as: DeviceKeys.ageIdentityName)
        expectSempereError(.invalidSecret) { try DeviceKeys.load(from: store) }
        try store.store(identity, as: DeviceKeys.ageIdentityName)
        #expect(try DeviceKeys.load(from: store) != nil)

        try store.delete(DeviceKeys.ageIdentityName)
        let error = expectSempereError(.invalidSecret) { try DeviceKeys.load(from: store) }
        #expect(error?.reason.contains(DeviceKeys.ageIdentityName) == true)
        // loadOrCreate does not paper over it with new keys.
        expectSempereError(.invalidSecret) { try DeviceKeys.loadOrCreate(in: store, postQuantum: false) }
    }
}
