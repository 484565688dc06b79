import Foundation

/// The seal and open steps AES-GCM and ChaCha20-Poly1305 share; the public types only add their
/// nonce rules.
enum AEADEngine {
    struct Cipher {
        let algorithm: FetchedAlgorithm
        let name: String
        let keyByteCount: Int
    }

    static let aes256GCM = Cipher(algorithm: OpenSSLAlgorithms.aes256GCM, name: "AES-256-GCM", keyByteCount: 32)
    static let chaCha20Poly1305 = Cipher(
        algorithm: OpenSSLAlgorithms.chaCha20Poly1305, name: "ChaCha20-Poly1305", keyByteCount: 32)

    static func context(_ cipher: Cipher, key: SymmetricKey, nonce: Data, sealing: Bool) throws -> AEADContext {
        try key.require(byteCount: cipher.keyByteCount, for: cipher.name)
        return try nonce.withUnsafeBytes { nonceBytes in
            try AEADContext(cipher.algorithm, name: cipher.name, key: key, nonce: nonceBytes, sealing: sealing)
        }
    }

    /// Runs `body` with a context keyed with `key` and set to `nonce`.
    ///
    /// For 12-byte nonces the context comes from, and goes back to, the key's own pool
    /// (``KeyedContexts``), so sealing many messages under one key schedules the key once, as
    /// `openssl speed -aead` does; only the nonce is set per message. A context whose operation ended in
    /// anything but success or a failed tag is not returned to the pool.
    static func withContext<R>(
        _ cipher: Cipher, key: SymmetricKey, nonce: Data, sealing: Bool, _ body: (AEADContext) throws -> R
    ) throws -> R {
        try nonce.withUnsafeBytes { try withContext(cipher, key: key, nonce: $0, sealing: sealing, body) }
    }

    static func withContext<R>(
        _ cipher: Cipher, key: SymmetricKey, nonce: UnsafeRawBufferPointer, sealing: Bool,
        _ body: (AEADContext) throws -> R
    ) throws -> R {
        try key.require(byteCount: cipher.keyByteCount, for: cipher.name)
        guard nonce.count == 12 else {
            return try body(
                try AEADContext(cipher.algorithm, name: cipher.name, key: key, nonce: nonce, sealing: sealing))
        }
        let slot = KeyedContexts.Slot(cipher: ObjectIdentifier(cipher.algorithm), sealing: sealing)
        let context: AEADContext
        if let pooled = key.contexts.take(slot) {
            try pooled.restart(nonce: nonce)
            context = pooled
        } else {
            context = try AEADContext(cipher.algorithm, name: cipher.name, key: key, nonce: nonce, sealing: sealing)
        }
        do {
            let result = try body(context)
            key.contexts.give(context, to: slot)
            return result
        } catch let error as CryptoError where error.code == .authenticationFailure {
            key.contexts.give(context, to: slot)
            throw error
        }
    }

    static func seal(
        _ cipher: Cipher, message: some DataProtocol, key: SymmetricKey, nonce: Data, aad: some DataProtocol
    ) throws -> (ciphertext: Data, tag: Data) {
        try withContext(cipher, key: key, nonce: nonce, sealing: true) { context in
            try withContiguousBytes(aad) { base, count in
                try context.authenticate(UnsafeRawBufferPointer(start: base, count: count))
            }
            let ciphertext = try withContiguousBytes(message) { base, count in
                try Data.uninitialized(count: count) { output in
                    try context.update(UnsafeRawBufferPointer(start: base, count: count), into: output)
                }
            }
            return (ciphertext, try context.finishSealing())
        }
    }

    static func open(
        _ cipher: Cipher, ciphertext: Data, tag: Data, key: SymmetricKey, nonce: Data, aad: some DataProtocol
    ) throws -> Data {
        try withContext(cipher, key: key, nonce: nonce, sealing: false) { context in
            try withContiguousBytes(aad) { base, count in
                try context.authenticate(UnsafeRawBufferPointer(start: base, count: count))
            }
            // `uninitialized` wipes the plaintext if the tag does not verify: unauthenticated plaintext is
            // never handed back, nor left in memory.
            return try ciphertext.withUnsafeBytes { input in
                try Data.uninitialized(count: input.count) { output in
                    try context.update(input, into: output)
                    try tag.withUnsafeBytes { try context.finishOpening(tag: $0) }
                }
            }
        }
    }

    /// Seals `message` into `output` as `ciphertext ‖ tag`, without associated data and without allocating.
    static func seal(
        _ cipher: Cipher, message: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
        key: SymmetricKey, nonce: UnsafeRawBufferPointer
    ) throws {
        precondition(output.count >= message.count + AEADContext.tagByteCount)
        try withContext(cipher, key: key, nonce: nonce, sealing: true) { context in
            try context.update(message, into: output)
            try context.finishSealing(tagInto: UnsafeMutableRawBufferPointer(rebasing: output[message.count...]))
        }
    }

    /// Opens `ciphertext ‖ tag` (`sealed`) into `output`; returns false, with `output` wiped, when the tag does
    /// not verify.
    static func open(
        _ cipher: Cipher, sealed: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
        key: SymmetricKey, nonce: UnsafeRawBufferPointer
    ) throws -> Bool {
        precondition(sealed.count >= AEADContext.tagByteCount)
        let count = sealed.count - AEADContext.tagByteCount
        precondition(output.count >= count)
        let plaintext = UnsafeMutableRawBufferPointer(rebasing: output[..<count])
        do {
            try withContext(cipher, key: key, nonce: nonce, sealing: false) { context in
                try context.update(UnsafeRawBufferPointer(rebasing: sealed[..<count]), into: plaintext)
                try context.finishOpening(tag: UnsafeRawBufferPointer(rebasing: sealed[count...]))
            }
            return true
        } catch let error as CryptoError where error.code == .authenticationFailure {
            OpenSSLMemory.cleanse(plaintext)
            return false
        }
    }

    static func checkTag(_ tag: some DataProtocol, _ name: String) throws -> Data {
        guard tag.count == AEADContext.tagByteCount else {
            throw CryptoError.incorrectParameterSize(
                "a \(name) tag (truncated tags are not accepted)", expected: "\(AEADContext.tagByteCount)",
                got: tag.count)
        }
        return tag.asData
    }
}

/// The cipher contexts a key has been scheduled into, kept with the key (at most two idle per cipher
/// and direction) so the next message under the same key skips context creation and the key
/// schedule. OpenSSL's providers wipe a context's key schedule when it is freed, which happens when
/// the last copy of the key goes away.
final class KeyedContexts: @unchecked Sendable {
    // @unchecked: `idle` is only touched while `lock` is held; a context taken out is used by one
    // caller at a time and handed back whole.
    struct Slot: Hashable {
        let cipher: ObjectIdentifier
        let sealing: Bool
    }

    private let lock = NSLock()
    private var idle: [Slot: [AEADContext]] = [:]

    func take(_ slot: Slot) -> AEADContext? {
        lock.withLock { idle[slot]?.popLast() }
    }

    func give(_ context: AEADContext, to slot: Slot) {
        lock.withLock {
            if idle[slot, default: []].count < 2 { idle[slot, default: []].append(context) }
        }
    }
}
