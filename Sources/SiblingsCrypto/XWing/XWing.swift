import Foundation

/// X-Wing, the hybrid KEM of ML-KEM-768 and X25519 (draft-connolly-cfrg-xwing-kem; HPKE KEM id
/// 0x647a): a box sealed to an X-Wing key stays shut unless both ML-KEM-768 and X25519 are broken.
/// Pixie's discovery key and every sign-in request use it; so does age's mlkem768x25519 stanza.
///
/// CryptoKit calls it `XWingMLKEM768X25519`; this package's code and the seeds say X-Wing, so the short
/// name ``XWing`` is an alias of the same type.
public typealias XWing = XWingMLKEM768X25519

/// X-Wing (draft-connolly-cfrg-xwing-kem) under CryptoKit's name; see ``XWing``.
public enum XWingMLKEM768X25519 {
    public static let publicKeyByteCount = 1216
    public static let ciphertextByteCount = 1120
    public static let seedByteCount = 32
    public static let sharedSecretByteCount = 32

    /// The combiner's label, "\.//^\" (draft-connolly-cfrg-xwing-kem, section 5.3).
    static let label = Data([0x5c, 0x2e, 0x2f, 0x2f, 0x5e, 0x5c])

    /// SHA3-256(ss_M ‖ ss_X ‖ ct_X ‖ pk_X ‖ label), hashed by OpenSSL straight into the key's wiped memory.
    static func combine(
        mlkemSecret: SymmetricKey, x25519Secret: SharedSecret, x25519Ciphertext: Data, x25519PublicKey: Data
    ) -> SymmetricKey {
        SymmetricKey(
            secureBytes: SecureBytes(count: sharedSecretByteCount) { out in
                mlkemSecret.withUnsafeBytes { ssM in
                    x25519Secret.withUnsafeBytes { ssX in
                        x25519Ciphertext.withUnsafeBytes { ctX in
                            x25519PublicKey.withUnsafeBytes { pkX in
                                label.withUnsafeBytes { label in
                                    DigestContext.keccak(.sha3_256, ssM, ssX, ctX, pkX, label, into: out)
                                }
                            }
                        }
                    }
                }
            })
    }

    /// An X-Wing decapsulation key: the 32-byte seed, from which both component keys are expanded.
    public struct PrivateKey: Sendable {
        let seed: SecureBytes
        let mlkem: MLKEM768.PrivateKey
        let x25519: Curve25519.KeyAgreement.PrivateKey
        public let publicKey: PublicKey

        /// A fresh key from 32 random bytes.
        public init() { self.init(source: SystemRandom()) }

        /// A key from `source`'s next 32 bytes (`@_spi(Testing)`: tests inject a deterministic source; production keys come from ``init()``).
        @_spi(Testing)
        public init(source: some SecureRandomSource) {
            self.init(validSeed: SecureBytes(count: 32) { source.fill($0) })
        }

        /// The key expanded from its 32-byte seed (section 5.2): SHAKE256(seed, 96) gives ML-KEM's d ‖ z and
        /// X25519's scalar. With `publicKey`, the key made from the seed must have that public key, or
        /// ``CryptoError/Code/publicKeyMismatch`` is thrown (CryptoKit's `init(seedRepresentation:publicKey:)`).
        public init(seedRepresentation: some DataProtocol, publicKey: PublicKey? = nil) throws {
            guard seedRepresentation.count == XWing.seedByteCount else {
                throw CryptoError.incorrectKeySize(
                    "an X-Wing seed", expected: XWing.seedByteCount, got: seedRepresentation.count)
            }
            self.init(validSeed: SecureBytes(seedRepresentation))
            if let publicKey, publicKey != self.publicKey { throw CryptoError.publicKeyMismatch("X-Wing key's") }
        }

        /// The key from CryptoKit's integrity-checked form, the seed then SHA3-256 of the public key (64 bytes);
        /// a hash that does not match the key the seed gives throws ``CryptoError/Code/publicKeyMismatch``.
        public init(integrityCheckedRepresentation: some DataProtocol) throws {
            self = try fromIntegrityChecked(
                integrityCheckedRepresentation, seedByteCount: XWing.seedByteCount, what: "X-Wing key",
                make: { try PrivateKey(seedRepresentation: $0) }, publicKey: { $0.publicKey.rawRepresentation })
        }

        init(validSeed: SecureBytes) {
            let expanded = SecureBytes(count: 96) { out in
                validSeed.withUnsafeBytes { DigestContext.keccak(.shake256, $0, into: out) }
            }
            do {
                mlkem = try expanded.withUnsafeBytes { try MLKEM768.PrivateKey(seedRepresentation: $0[0..<64]) }
                x25519 = try expanded.withUnsafeBytes {
                    try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: $0[64..<96])
                }
            } catch {
                fatalError("sizes fixed above cannot be wrong: \(error)")
            }
            seed = validSeed
            publicKey = PublicKey(mlkem: mlkem.publicKey, x25519: x25519.publicKey)
        }

        /// The 32-byte seed. Keep it secret.
        public var seedRepresentation: Data { seed.withUnsafeBytes { Data($0) } }

        /// The seed ‖ SHA3-256(public key) (64 bytes), CryptoKit's form for storing a key. Keep it secret.
        public var integrityCheckedRepresentation: Data {
            seed.integrityChecked(publicKey: publicKey.rawRepresentation)
        }

        /// The component keys' secret bytes (ML-KEM's d ‖ z, then X25519's scalar), for interop with
        /// implementations that store X-Wing keys expanded. Keep them secret.
        public var expandedComponents: (mlkemSeed: Data, x25519: Data) {
            (mlkem.seedRepresentation, x25519.rawRepresentation)
        }

        /// Decapsulation (section 5.4). Throws `.incorrectParameterSize` for a ciphertext that is not
        /// 1120 bytes, and `.invalidSharedSecret` when its X25519 part is a low-order point (as X25519
        /// implementations everywhere, OpenSSL and pyca included, refuse the all-zero result).
        public func decapsulate(_ ciphertext: some DataProtocol) throws -> SymmetricKey {
            guard ciphertext.count == XWing.ciphertextByteCount else {
                throw CryptoError.incorrectParameterSize(
                    "an X-Wing ciphertext", expected: "\(XWing.ciphertextByteCount)", got: ciphertext.count)
            }
            let bytes = ciphertext.asData
            let ctX = bytes.suffix(32)
            let ssM = try mlkem.decapsulate(bytes.prefix(MLKEM768.ciphertextByteCount))
            let ssX = try x25519.sharedSecretFromKeyAgreement(with: try .init(rawRepresentation: ctX))
            return XWing.combine(
                mlkemSecret: ssM, x25519Secret: ssX, x25519Ciphertext: Data(ctX),
                x25519PublicKey: publicKey.x25519.rawRepresentation)
        }
    }

    /// An X-Wing encapsulation key: pk_M (1184 bytes) ‖ pk_X (32 bytes).
    public struct PublicKey: Sendable, Equatable {
        let mlkem: MLKEM768.PublicKey
        let x25519: Curve25519.KeyAgreement.PublicKey

        init(mlkem: MLKEM768.PublicKey, x25519: Curve25519.KeyAgreement.PublicKey) {
            self.mlkem = mlkem
            self.x25519 = x25519
        }

        /// Decodes pk_M ‖ pk_X; pk_M must pass ML-KEM's modulus check.
        public init(rawRepresentation: some DataProtocol) throws {
            guard rawRepresentation.count == XWing.publicKeyByteCount else {
                throw CryptoError.incorrectKeySize(
                    "an X-Wing public key", expected: XWing.publicKeyByteCount, got: rawRepresentation.count)
            }
            let bytes = rawRepresentation.asData
            mlkem = try MLKEM768.PublicKey(rawRepresentation: bytes.prefix(MLKEM768.publicKeyByteCount))
            x25519 = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: bytes.suffix(32))
        }

        public var rawRepresentation: Data { mlkem.rawRepresentation + x25519.rawRepresentation }

        /// Encapsulation (section 5.3) with 64 fresh random bytes.
        public func encapsulate() throws -> KEM.EncapsulationResult {
            try encapsulate(eseed: SecureBytes(count: 64) { SecureRandom.fill($0) })
        }

        /// The derandomized encapsulation: `randomness` is eseed (64 bytes), ML-KEM's m then X25519's
        /// ephemeral scalar. For known-answer tests only (`@_spi(Testing)`).
        @_spi(Testing)
        public func encapsulate(randomness: some DataProtocol) throws -> KEM.EncapsulationResult {
            guard randomness.count == 64 else {
                throw CryptoError.incorrectParameterSize(
                    "X-Wing encapsulation randomness", expected: "64", got: randomness.count)
            }
            return try encapsulate(eseed: SecureBytes(randomness))
        }

        /// Encapsulation from eseed, which stays in wiped memory: ML-KEM's m is read from it in place.
        func encapsulate(eseed: SecureBytes) throws -> KEM.EncapsulationResult {
            let ephemeral = try eseed.withUnsafeBytes {
                try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: $0[32..<64])
            }
            let ctX = ephemeral.publicKey.rawRepresentation
            let ssX = try ephemeral.sharedSecretFromKeyAgreement(with: x25519)
            let kem = eseed.withUnsafeBytes { mlkem.encapsulate(m: UnsafeRawBufferPointer(rebasing: $0[0..<32])) }
            let shared = XWing.combine(
                mlkemSecret: kem.sharedSecret, x25519Secret: ssX, x25519Ciphertext: ctX,
                x25519PublicKey: x25519.rawRepresentation)
            return KEM.EncapsulationResult(sharedSecret: shared, encapsulated: kem.encapsulated + ctX)
        }

        public static func == (lhs: Self, rhs: Self) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }
    }
}
