import Foundation

/// ChaCha20-Poly1305 (RFC 8439, the IETF variant with a 12-byte nonce), on OpenSSL.
public enum ChaChaPoly {
    /// A 12-byte nonce.
    public struct Nonce: Sendable, ContiguousBytes, Sequence {
        let bytes: Data

        /// A fresh random nonce.
        public init() { bytes = SecureRandom.bytes(count: 12) }

        /// A nonce from exactly 12 bytes.
        public init(data: some DataProtocol) throws {
            guard data.count == 12 else {
                throw CryptoError.incorrectParameterSize("a ChaCha20-Poly1305 nonce", expected: "12", got: data.count)
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

        public init(nonce: Nonce, ciphertext: some DataProtocol, tag: some DataProtocol) throws {
            self.nonce = nonce
            self.ciphertext = ciphertext.asData
            self.tag = try AEADEngine.checkTag(tag, "ChaCha20-Poly1305")
        }

        /// The box from `nonce (12) ‖ ciphertext ‖ tag (16)`.
        public init(combined: some DataProtocol) throws {
            let bytes = combined.asData
            guard bytes.count >= 12 + 16 else {
                throw CryptoError.incorrectParameterSize(
                    "a combined ChaCha20-Poly1305 box (nonce ‖ ciphertext ‖ tag)", expected: "at least 28",
                    got: bytes.count)
            }
            try self.init(
                nonce: Nonce(data: bytes.prefix(12)), ciphertext: bytes.dropFirst(12).dropLast(16),
                tag: bytes.suffix(16))
        }

        /// `nonce ‖ ciphertext ‖ tag`.
        public var combined: Data { nonce.bytes + ciphertext + tag }
    }

    /// Encrypts and authenticates `message` and authenticates `authenticatedData`.
    /// A nonce must never repeat under one key; leave `nonce` nil for a random one.
    public static func seal(
        _ message: some DataProtocol, using key: SymmetricKey, nonce: Nonce? = nil,
        authenticating authenticatedData: some DataProtocol
    ) throws -> SealedBox {
        let nonce = nonce ?? Nonce()
        let (ciphertext, tag) = try AEADEngine.seal(
            AEADEngine.chaCha20Poly1305, message: message, key: key, nonce: nonce.bytes, aad: authenticatedData)
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
            AEADEngine.chaCha20Poly1305, ciphertext: sealedBox.ciphertext, tag: sealedBox.tag, key: key,
            nonce: sealedBox.nonce.bytes, aad: authenticatedData)
    }

    public static func open(_ sealedBox: SealedBox, using key: SymmetricKey) throws -> Data {
        try open(sealedBox, using: key, authenticating: Data())
    }

    // MARK: - Into buffers the caller reuses (for this package's streaming formats)

    /// Seals `message` into `output`, which receives `ciphertext ‖ tag` (`message.count + 16` bytes), without
    /// associated data and without allocating. `nonce` is 12 bytes and must never repeat under `key`.
    /// Safe to call from several threads at once with the same key (each gets its own keyed context).
    package static func seal(
        _ message: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, using key: SymmetricKey,
        nonce: UnsafeRawBufferPointer
    ) throws {
        try AEADEngine.seal(AEADEngine.chaCha20Poly1305, message: message, into: output, key: key, nonce: nonce)
    }

    /// Verifies `sealed` (`ciphertext ‖ tag`, no associated data) and decrypts it into `output`
    /// (`sealed.count - 16` bytes). Returns false when the tag does not verify; `output` is wiped then, so
    /// no unauthenticated plaintext is left in it.
    package static func open(
        _ sealed: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, using key: SymmetricKey,
        nonce: UnsafeRawBufferPointer
    ) throws -> Bool {
        try AEADEngine.open(AEADEngine.chaCha20Poly1305, sealed: sealed, into: output, key: key, nonce: nonce)
    }
}
