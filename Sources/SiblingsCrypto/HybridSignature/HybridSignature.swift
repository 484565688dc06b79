import Foundation

/// The hybrid signature Pixie signs certificates with: Ed25519 and ML-DSA-65 over the same message,
/// valid only when both verify, so a signature stands unless both schemes are broken (the seed:
/// "it stays valid unless both are broken").
///
/// Encodings (docs/crypto-core.md, "Hybrid signature"):
/// - private key: one 32-byte seed; SHAKE256("siblings/hybrid-signature/v1/keygen" ‖ seed, 64) gives the
///   Ed25519 seed (first 32 bytes) and ML-DSA-65's ξ (last 32).
/// - public key: Ed25519 public key (32) ‖ ML-DSA-65 public key (1952) = 1984 bytes.
/// - signature: Ed25519 signature (64) ‖ ML-DSA-65 signature (3309) = 3373 bytes.
/// - both halves sign M' = "siblings/hybrid-signature/v1" ‖ 0x00 ‖ len(ctx) ‖ ctx ‖ M, and ML-DSA-65
///   additionally gets the context string "siblings/hybrid-signature/v1". The prefix separates this
///   use from any other use of the same component keys, so neither half can be lifted out and
///   presented as a plain Ed25519 or ML-DSA-65 signature of M, and the length-prefixed context
///   separates one purpose (a PhoneOwnershipCert, a SenderCert, a checkpoint) from another.
public enum HybridSignature {
    public static let seedByteCount = 32
    public static let publicKeyByteCount = 32 + MLDSA65.publicKeyByteCount
    public static let signatureByteCount = 64 + MLDSA65.signatureByteCount
    static let domain = Data("siblings/hybrid-signature/v1".utf8)
    static let keygenLabel = Data("siblings/hybrid-signature/v1/keygen".utf8)

    /// M' = domain ‖ 0x00 ‖ len(context) ‖ context ‖ message.
    static func representative(_ message: some DataProtocol, context: some DataProtocol) throws -> Data {
        guard context.count <= 255 else {
            throw CryptoError(
                .invalidParameter, "a hybrid-signature context is at most 255 bytes, got \(context.count)")
        }
        var out = domain
        out.append(0)
        out.append(UInt8(context.count))
        out.append(contentsOf: context)
        out.append(contentsOf: message)
        return out
    }

    public struct PrivateKey: Sendable {
        let seed: SecureBytes
        let ed25519: Curve25519.Signing.PrivateKey
        let mldsa: MLDSA65.PrivateKey
        public let publicKey: PublicKey

        public init() { self.init(source: SystemRandom()) }

        /// A key from `source`'s next 32 bytes (`@_spi(Testing)`: tests inject a deterministic source; production keys come from ``init()``).
        @_spi(Testing)
        public init(source: some SecureRandomSource) {
            self.init(validSeed: SecureBytes(count: 32) { source.fill($0) })
        }

        /// The key derived from its 32-byte seed.
        public init(seedRepresentation: some DataProtocol) throws {
            guard seedRepresentation.count == HybridSignature.seedByteCount else {
                throw CryptoError.incorrectKeySize(
                    "a hybrid signature seed", expected: HybridSignature.seedByteCount, got: seedRepresentation.count)
            }
            self.init(validSeed: SecureBytes(seedRepresentation))
        }

        private init(validSeed: SecureBytes) {
            let expanded = SecureBytes(count: 64) { out in
                HybridSignature.keygenLabel.withUnsafeBytes { label in
                    validSeed.withUnsafeBytes { DigestContext.keccak(.shake256, label, $0, into: out) }
                }
            }
            do {
                ed25519 = try expanded.withUnsafeBytes {
                    try Curve25519.Signing.PrivateKey(rawRepresentation: $0[0..<32])
                }
                mldsa = try expanded.withUnsafeBytes { try MLDSA65.PrivateKey(seedRepresentation: $0[32..<64]) }
            } catch {
                fatalError("sizes fixed above cannot be wrong: \(error)")
            }
            seed = validSeed
            publicKey = PublicKey(ed25519: ed25519.publicKey, mldsa: mldsa.publicKey)
        }

        /// The 32-byte seed. Keep it secret.
        public var seedRepresentation: Data { seed.withUnsafeBytes { Data($0) } }

        /// Signs `message` for the purpose named by `context` (0 to 255 bytes). ML-DSA-65 signs hedged.
        public func signature(for message: some DataProtocol, context: some DataProtocol) throws -> Signature {
            let representative = try HybridSignature.representative(message, context: context)
            let classical = try ed25519.signature(for: representative)
            let postQuantum = try mldsa.signature(for: representative, context: HybridSignature.domain)
            return try Signature(rawRepresentation: classical + postQuantum)
        }
    }

    public struct PublicKey: Sendable, Equatable {
        let ed25519: Curve25519.Signing.PublicKey
        let mldsa: MLDSA65.PublicKey

        init(ed25519: Curve25519.Signing.PublicKey, mldsa: MLDSA65.PublicKey) {
            self.ed25519 = ed25519
            self.mldsa = mldsa
        }

        /// Ed25519 public key (32) ‖ ML-DSA-65 public key (1952). Each half is decoded by its own
        /// rules (the Ed25519 half refuses low-order points).
        public init(rawRepresentation: some DataProtocol) throws {
            guard rawRepresentation.count == HybridSignature.publicKeyByteCount else {
                throw CryptoError.incorrectKeySize(
                    "a hybrid signature public key", expected: HybridSignature.publicKeyByteCount,
                    got: rawRepresentation.count)
            }
            let bytes = rawRepresentation.asData
            ed25519 = try Curve25519.Signing.PublicKey(rawRepresentation: bytes.prefix(32))
            mldsa = try MLDSA65.PublicKey(rawRepresentation: bytes.dropFirst(32))
        }

        public var rawRepresentation: Data { ed25519.rawRepresentation + mldsa.rawRepresentation }

        /// True only when both halves verify over M' for this `context`.
        public func isValidSignature(
            _ signature: Signature, for message: some DataProtocol, context: some DataProtocol
        ) -> Bool {
            guard let representative = try? HybridSignature.representative(message, context: context) else {
                return false
            }
            let classical = ed25519.isValidSignature(signature.ed25519, for: representative)
            let postQuantum = mldsa.isValidSignature(
                signature.mldsa, for: representative, context: HybridSignature.domain)
            return classical && postQuantum
        }
    }

    public struct Signature: Sendable, Equatable {
        /// Ed25519 signature (64) ‖ ML-DSA-65 signature (3309).
        public let rawRepresentation: Data

        public init(rawRepresentation: some DataProtocol) throws {
            guard rawRepresentation.count == HybridSignature.signatureByteCount else {
                throw CryptoError.incorrectParameterSize(
                    "a hybrid signature", expected: "\(HybridSignature.signatureByteCount)",
                    got: rawRepresentation.count)
            }
            self.rawRepresentation = rawRepresentation.asData
        }

        var ed25519: Data { rawRepresentation.prefix(64) }
        var mldsa: Data { rawRepresentation.dropFirst(64) }
    }
}
