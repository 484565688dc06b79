import Foundation

/// NIST P-256 (secp256r1). Only signing is offered: ECDSA with SHA-256 (FIPS 186-5), which WebAuthn
/// and COSE call ES256 and which passkeys use.
public enum P256 {
    public enum Signing {
        /// A P-256 private key: a scalar d in [1, n − 1].
        public struct PrivateKey: Sendable {
            let key: PKey
            let scalar: SecureBytes
            public let publicKey: PublicKey

            /// A fresh random key.
            public init() {
                self.init(source: SystemRandom())
            }

            /// A key drawn from `source` (rejection sampling: 32 bytes at a time until one is in [1, n − 1])
            /// (`@_spi(Testing)`: tests inject a deterministic source; production keys come from ``init()``).
            @_spi(Testing)
            public init(source: some SecureRandomSource) {
                while true {
                    let candidate = source.bytes(count: 32)
                    if let key = try? PrivateKey(rawRepresentation: candidate) {
                        self = key
                        return
                    }
                }
            }

            /// A key from its 32-byte big-endian scalar; throws unless 1 ≤ d < n.
            public init(rawRepresentation: some DataProtocol) throws {
                guard rawRepresentation.count == 32 else {
                    throw CryptoError.incorrectKeySize(
                        "a P-256 private key", expected: 32, got: rawRepresentation.count)
                }
                let bytes = Data(rawRepresentation)
                guard try P256Group.shared.isValidPrivateScalar(bytes) else {
                    throw CryptoError(.invalidEncoding, "a P-256 private key must be a number from 1 to n − 1")
                }
                let point = try P256Group.shared.publicPoint(forPrivateScalar: bytes)
                key = try PKey.p256(uncompressedPoint: point, privateScalar: bytes)
                scalar = SecureBytes(bytes)
                publicKey = try PublicKey(validatedUncompressed: point)
            }

            /// The 32-byte big-endian scalar. Keep it secret.
            public var rawRepresentation: Data { scalar.withUnsafeBytes { Data($0) } }

            /// An ECDSA signature over SHA-256(`data`) (randomized, as OpenSSL signs).
            public func signature(for data: some DataProtocol) throws -> ECDSASignature {
                try ECDSASignature(derRepresentation: try key.sign(digest: OpenSSLAlgorithms.sha256, message: data))
            }
        }

        /// A P-256 public key: a point on the curve, never the identity.
        public struct PublicKey: Sendable, Equatable {
            let key: PKey
            /// `04 ‖ x ‖ y` (65 bytes, SEC 1 / X9.62 uncompressed).
            public let x963Representation: Data

            fileprivate init(validatedUncompressed point: Data) throws {
                x963Representation = point
                key = try PKey.p256(uncompressedPoint: point, privateScalar: nil)
            }

            /// From `04 ‖ x ‖ y` (65 bytes).
            public init(x963Representation: some DataProtocol) throws {
                guard x963Representation.count == 65, x963Representation.first == 0x04 else {
                    throw CryptoError(
                        .invalidEncoding,
                        "an X9.62 P-256 public key is 65 bytes starting with 04, got \(x963Representation.count) bytes")
                }
                try self.init(validatedUncompressed: try P256Group.shared.uncompressed(Data(x963Representation)))
            }

            /// From `x ‖ y` (64 bytes), the form COSE and WebAuthn carry.
            public init(rawRepresentation: some DataProtocol) throws {
                guard rawRepresentation.count == 64 else {
                    throw CryptoError.incorrectKeySize(
                        "a raw P-256 public key (x ‖ y)", expected: 64, got: rawRepresentation.count)
                }
                try self.init(x963Representation: Data([0x04]) + Data(rawRepresentation))
            }

            /// From `02/03 ‖ x` (33 bytes).
            public init(compressedRepresentation: some DataProtocol) throws {
                guard compressedRepresentation.count == 33,
                    compressedRepresentation.first == 0x02 || compressedRepresentation.first == 0x03
                else {
                    throw CryptoError(
                        .invalidEncoding,
                        "a compressed P-256 public key is 33 bytes starting with 02 or 03, got \(compressedRepresentation.count) bytes"
                    )
                }
                try self.init(validatedUncompressed: try P256Group.shared.uncompressed(Data(compressedRepresentation)))
            }

            /// `x ‖ y` (64 bytes).
            public var rawRepresentation: Data { x963Representation.dropFirst() }

            /// `02/03 ‖ x` (33 bytes).
            public var compressedRepresentation: Data {
                do {
                    return try P256Group.shared.compressed(x963Representation)
                } catch {
                    fatalError("OpenSSL cannot compress a validated P-256 point: \(error)")
                }
            }

            /// Whether `signature` is a valid ECDSA signature over SHA-256(`data`).
            public func isValidSignature(_ signature: ECDSASignature, for data: some DataProtocol) -> Bool {
                key.verify(digest: OpenSSLAlgorithms.sha256, signature: signature.derRepresentation, message: data)
            }

            public static func == (lhs: Self, rhs: Self) -> Bool { lhs.x963Representation == rhs.x963Representation }
        }
    }
}

extension P256.Signing {
    /// An ECDSA P-256 signature, as DER or as raw `r ‖ s`.
    public struct ECDSASignature: Sendable, Equatable {
        /// `r ‖ s`, 32 bytes each, big-endian (the form JOSE and COSE use).
        public let rawRepresentation: Data

        /// From `r ‖ s` (64 bytes).
        public init(rawRepresentation: some DataProtocol) throws {
            guard rawRepresentation.count == 64 else {
                throw CryptoError.incorrectParameterSize(
                    "a raw ECDSA P-256 signature (r ‖ s)", expected: "64", got: rawRepresentation.count)
            }
            self.rawRepresentation = Data(rawRepresentation)
        }

        /// From strict DER (`SEQUENCE { r INTEGER, s INTEGER }`, the form WebAuthn and X.509 use).
        public init(derRepresentation: some DataProtocol) throws {
            rawRepresentation = try ECDSASignatureCoding.raw(fromDER: Data(derRepresentation))
        }

        /// The DER encoding.
        public var derRepresentation: Data {
            do {
                return try ECDSASignatureCoding.der(fromRaw: rawRepresentation)
            } catch {
                fatalError("OpenSSL cannot DER-encode an ECDSA signature: \(error)")
            }
        }
    }
}
