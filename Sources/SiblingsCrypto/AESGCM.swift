import Foundation

/// The AES block cipher, as a namespace (CryptoKit's shape).
public enum AES {
    /// AES-256 in Galois/Counter Mode (NIST SP 800-38D), on OpenSSL. Keys are 256 bits; tags are
    /// always the full 16 bytes.
    public enum GCM {}
}

extension AES.GCM {
    /// A GCM nonce: 12 bytes by default; longer nonces (SP 800-38D allows them, and they are GHASHed
    /// down) are accepted for interoperability, shorter ones are refused.
    public struct Nonce: Sendable, ContiguousBytes, Sequence {
        let bytes: Data

        /// A fresh random 12-byte nonce.
        public init() { bytes = SecureRandom.bytes(count: 12) }

        /// A nonce from `data`, which must be at least 12 bytes.
        public init(data: some DataProtocol) throws {
            guard data.count >= 12 else {
                throw CryptoError.incorrectParameterSize("an AES-GCM nonce", expected: "at least 12", got: data.count)
            }
            bytes = data.asData
        }

        public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            try bytes.withUnsafeBytes(body)
        }

        public func makeIterator() -> Data.Iterator { bytes.makeIterator() }
    }

    /// A sealed message: nonce, ciphertext and the 16-byte tag.
    public struct SealedBox: Sendable {
        public let nonce: Nonce
        public let ciphertext: Data
        public let tag: Data

        /// The box from its parts; the tag must be 16 bytes.
        public init(nonce: Nonce, ciphertext: some DataProtocol, tag: some DataProtocol) throws {
            self.nonce = nonce
            self.ciphertext = ciphertext.asData
            self.tag = try AEADEngine.checkTag(tag, "AES-GCM")
        }

        /// The box from `nonce (12) ‖ ciphertext ‖ tag (16)`.
        public init(combined: some DataProtocol) throws {
            let bytes = combined.asData
            guard bytes.count >= 12 + 16 else {
                throw CryptoError.incorrectParameterSize(
                    "a combined AES-GCM box (nonce ‖ ciphertext ‖ tag)", expected: "at least 28", got: bytes.count)
            }
            try self.init(
                nonce: Nonce(data: bytes.prefix(12)), ciphertext: bytes.dropFirst(12).dropLast(16),
                tag: bytes.suffix(16))
        }

        /// `nonce ‖ ciphertext ‖ tag`; nil when the nonce is not 12 bytes (the combined form fixes it at 12).
        public var combined: Data? {
            guard nonce.bytes.count == 12 else { return nil }
            return nonce.bytes + ciphertext + tag
        }
    }

    /// Encrypts and authenticates `message` and authenticates `authenticatedData`.
    /// A nonce must never repeat under one key; leave `nonce` nil for a random one.
    public static func seal(
        _ message: some DataProtocol, using key: SymmetricKey, nonce: Nonce? = nil,
        authenticating authenticatedData: some DataProtocol
    ) throws -> SealedBox {
        let nonce = nonce ?? Nonce()
        let (ciphertext, tag) = try AEADEngine.seal(
            AEADEngine.aes256GCM, message: message, key: key, nonce: nonce.bytes, aad: authenticatedData)
        return try SealedBox(nonce: nonce, ciphertext: ciphertext, tag: tag)
    }

    public static func seal(
        _ message: some DataProtocol, using key: SymmetricKey, nonce: Nonce? = nil
    ) throws
        -> SealedBox
    {
        try seal(message, using: key, nonce: nonce, authenticating: Data())
    }

    /// Verifies and decrypts `sealedBox`; throws ``CryptoError/Code/authenticationFailure`` when anything
    /// was altered. No plaintext is returned unless the tag verifies.
    public static func open(
        _ sealedBox: SealedBox, using key: SymmetricKey, authenticating authenticatedData: some DataProtocol
    ) throws -> Data {
        try AEADEngine.open(
            AEADEngine.aes256GCM, ciphertext: sealedBox.ciphertext, tag: sealedBox.tag, key: key,
            nonce: sealedBox.nonce.bytes, aad: authenticatedData)
    }

    public static func open(_ sealedBox: SealedBox, using key: SymmetricKey) throws -> Data {
        try open(sealedBox, using: key, authenticating: Data())
    }
}
