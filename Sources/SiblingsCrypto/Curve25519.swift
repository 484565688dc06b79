import Foundation

/// Curve25519: X25519 key agreement (RFC 7748) and Ed25519 signatures (RFC 8032), on OpenSSL.
public enum Curve25519 {
    /// X25519 key agreement (RFC 7748, section 5).
    public enum KeyAgreement {
        /// An X25519 private key: a 32-byte scalar (clamped when used, as RFC 7748 says).
        public struct PrivateKey: Sendable {
            let key: PKey
            let scalar: SecureBytes

            /// A fresh random key.
            public init() {
                self.init(source: SystemRandom())
            }

            /// A key from `source`'s next 32 bytes (`@_spi(Testing)`: tests inject a deterministic source; production keys come from ``init()``).
            @_spi(Testing)
            public init(source: some SecureRandomSource) {
                let scalar = SecureBytes(count: 32) { source.fill($0) }
                // 32 bytes are always a valid X25519 private key.
                self.init(validScalar: scalar)
            }

            /// A key from its 32-byte scalar.
            public init(rawRepresentation: some DataProtocol) throws {
                guard rawRepresentation.count == 32 else {
                    throw CryptoError.incorrectKeySize(
                        "an X25519 private key", expected: 32, got: rawRepresentation.count)
                }
                self.init(validScalar: SecureBytes(rawRepresentation))
            }

            private init(validScalar: SecureBytes) {
                scalar = validScalar
                // OpenSSL's X25519 is outside the valgrind constant-time check (Tests/ConstantTimeCheck):
                // the scalar is marked public as it crosses into OpenSSL. A no-op outside valgrind.
                validScalar.declassifyForOpenSSL()
                do {
                    key = try PKey.rawPrivate(.x25519, validScalar)
                } catch {
                    fatalError("OpenSSL refused a 32-byte X25519 key: \(error)")
                }
            }

            /// The scalar. Keep it secret.
            public var rawRepresentation: Data { scalar.withUnsafeBytes { Data($0) } }

            public var publicKey: PublicKey {
                do {
                    return PublicKey(key: try PKey.rawPublic(.x25519, try key.rawPublicKey()))
                } catch {
                    fatalError("OpenSSL cannot export an X25519 public key: \(error)")
                }
            }

            /// X25519(self, peer). Throws ``CryptoError/Code/invalidSharedSecret`` when the result is all
            /// zeros, which happens exactly when `peer` is a low-order point (age and HPKE require the check).
            public func sharedSecretFromKeyAgreement(with peer: PublicKey) throws -> SharedSecret {
                SharedSecret(bytes: try key.deriveX25519(with: peer.key))
            }
        }

        /// An X25519 public key: a 32-byte u-coordinate. Every 32-byte string is accepted, as RFC 7748
        /// requires (the top bit is ignored).
        public struct PublicKey: Sendable, Equatable {
            let key: PKey

            init(key: PKey) { self.key = key }

            public init(rawRepresentation: some DataProtocol) throws {
                guard rawRepresentation.count == 32 else {
                    throw CryptoError.incorrectKeySize(
                        "an X25519 public key", expected: 32, got: rawRepresentation.count)
                }
                key = try PKey.rawPublic(.x25519, Data(rawRepresentation))
            }

            public var rawRepresentation: Data {
                do { return try key.rawPublicKey() } catch {
                    fatalError("OpenSSL cannot export a public key: \(error)")
                }
            }

            public static func == (lhs: Self, rhs: Self) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }
        }
    }

    /// Ed25519 signatures (RFC 8032, pure mode).
    ///
    /// Verification policy (docs/crypto-core.md, "Ed25519 verification policy"): OpenSSL's
    /// cofactorless check, which rejects non-canonical R and S and low-order residues, plus a refusal
    /// of every low-order point, in any encoding, as a public key A (at decoding) or as R. This is
    /// ed25519-dalek's `verify_strict` behaviour: a signature cannot verify for more than one message
    /// under keys an attacker chose to be weak.
    public enum Signing {
        /// An Ed25519 private key: the 32-byte seed of RFC 8032, section 5.1.5.
        public struct PrivateKey: Sendable {
            let key: PKey
            let seed: SecureBytes

            /// A fresh random key.
            public init() {
                self.init(source: SystemRandom())
            }

            /// A key from `source`'s next 32 bytes (`@_spi(Testing)`: tests inject a deterministic source; production keys come from ``init()``).
            @_spi(Testing)
            public init(source: some SecureRandomSource) {
                self.init(validSeed: SecureBytes(count: 32) { source.fill($0) })
            }

            /// A key from its 32-byte seed.
            public init(rawRepresentation: some DataProtocol) throws {
                guard rawRepresentation.count == 32 else {
                    throw CryptoError.incorrectKeySize(
                        "an Ed25519 private key (seed)", expected: 32, got: rawRepresentation.count)
                }
                self.init(validSeed: SecureBytes(rawRepresentation))
            }

            private init(validSeed: SecureBytes) {
                seed = validSeed
                // OpenSSL's Ed25519 is outside the valgrind constant-time check, as X25519 is (see there).
                validSeed.declassifyForOpenSSL()
                do {
                    key = try PKey.rawPrivate(.ed25519, validSeed)
                } catch {
                    fatalError("OpenSSL refused a 32-byte Ed25519 seed: \(error)")
                }
            }

            /// The seed. Keep it secret.
            public var rawRepresentation: Data { seed.withUnsafeBytes { Data($0) } }

            public var publicKey: PublicKey {
                do {
                    return try PublicKey(rawRepresentation: try key.rawPublicKey())
                } catch {
                    fatalError("OpenSSL produced an unusable Ed25519 public key: \(error)")
                }
            }

            /// The 64-byte signature `R ‖ S` of `data` (deterministic, RFC 8032 section 5.1.6).
            public func signature(for data: some DataProtocol) throws -> Data {
                try key.sign(digest: nil, message: data)
            }
        }

        /// An Ed25519 public key (the 32-byte encoding of A).
        public struct PublicKey: Sendable, Equatable {
            let key: PKey
            public let rawRepresentation: Data

            /// Decodes A. Refuses wrong lengths and every encoding of a low-order point.
            public init(rawRepresentation: some DataProtocol) throws {
                guard rawRepresentation.count == 32 else {
                    throw CryptoError.incorrectKeySize(
                        "an Ed25519 public key", expected: 32, got: rawRepresentation.count)
                }
                let bytes = Data(rawRepresentation)
                guard !Ed25519Policy.isLowOrder(bytes) else {
                    throw CryptoError(
                        .invalidEncoding,
                        "the Ed25519 public key is a low-order point, which no honest key generator produces")
                }
                key = try PKey.rawPublic(.ed25519, bytes)
                self.rawRepresentation = bytes
            }

            /// Whether `signature` is a valid signature of `data` under this key, by the policy above.
            public func isValidSignature(_ signature: some DataProtocol, for data: some DataProtocol) -> Bool {
                guard signature.count == 64 else { return false }
                let bytes = Data(signature)
                guard !Ed25519Policy.isLowOrder(bytes.prefix(32)) else { return false }
                return key.verify(digest: nil, signature: bytes, message: data)
            }

            public static func == (lhs: Self, rhs: Self) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }
        }
    }
}

/// The low-order points of edwards25519, in every encoding (canonical, x = −0, y ≥ p): 8 points,
/// 14 encodings (C2SP CCTV ed25519 README, "Low-order edwards25519 point encodings").
enum Ed25519Policy {
    static let lowOrderEncodings: Set<Data> = {
        let hex = [
            "0000000000000000000000000000000000000000000000000000000000000000",
            "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
            "0000000000000000000000000000000000000000000000000000000000000080",
            "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
            "0100000000000000000000000000000000000000000000000000000000000000",
            "0100000000000000000000000000000000000000000000000000000000000080",
            "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
            "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
            "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
            "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
            "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
            "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
            "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
            "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        ]
        return Set(hex.map { try! Data(hexString: $0) })
    }()

    static func isLowOrder(_ encoding: Data) -> Bool {
        lowOrderEncodings.contains(Data(encoding))
    }
}

/// The output of a key agreement. Derive keys from it; never use it as a key directly.
public struct SharedSecret: Sendable, ContiguousBytes {
    let bytes: SecureBytes

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }

    /// HKDF (RFC 5869) with the shared secret as input key material.
    public func hkdfDerivedSymmetricKey<H: HashFunction>(
        using hash: H.Type, salt: some DataProtocol, sharedInfo: some DataProtocol, outputByteCount: Int
    ) throws -> SymmetricKey {
        try HKDF<H>.deriveKey(
            inputKeyMaterial: SymmetricKey(secureBytes: bytes), salt: salt, info: sharedInfo,
            outputByteCount: outputByteCount)
    }
}
