import Foundation
import SiblingsCrypto

/// The oblivious pseudorandom functions of RFC 9497 on its ciphersuite ristretto255-SHA512 (§4.1), in the shape of
/// CryptoKit's key namespaces: ``PrivateKey`` and ``PublicKey``, a ``Client`` that blinds and finalizes, a
/// ``Server`` that evaluates. All three modes are here: OPRF (``Mode/oprf``), VOPRF with a batched DLEQ proof
/// (``Mode/voprf``) and POPRF with a public info string (``Mode/poprf``).
///
/// The group is libsodium's ristretto255; hashing (SHA-512, expand_message_xmd) is SiblingsCrypto's. Elements,
/// scalars and proofs cross the API as `Data` in their RFC 9497 encodings (32, 32 and 64 bytes); every element
/// that comes in is checked (canonical, not the identity) before use.
public enum VOPRF {
    /// The ciphersuite identifier, as in the context string.
    public static let identifier = "ristretto255-SHA512"
    /// Ne: bytes of a serialized element (a public key, blinded or evaluated element).
    public static let elementByteCount = 32
    /// Ns: bytes of a serialized scalar (a private key, a blind).
    public static let scalarByteCount = 32
    /// A proof: the challenge c and response s, each a scalar.
    public static let proofByteCount = 64
    /// Nh: bytes of a PRF output (SHA-512).
    public static let outputByteCount = 64
    /// The largest batch: RFC 9497 frames a batch index in two bytes.
    public static let maximumBatchSize = 65_535

    /// RFC 9497's three protocol variants (§3); the mode is part of every domain separation tag.
    public enum Mode: UInt8, Sendable, CaseIterable {
        /// Base mode: no proof, the client trusts the server's key.
        case oprf = 0
        /// Verifiable mode: the server proves (DLEQ) that it evaluated with the key behind its public key.
        case voprf = 1
        /// Partially oblivious: as verifiable, with a public info string bound into the evaluation.
        case poprf = 2
    }
}

typealias Group = Ristretto255

/// One mode's domain separation (RFC 9497 §3.1): contextString = "OPRFV1-" ‖ I2OSP(mode, 1) ‖ "-" ‖ identifier.
struct Suite: Sendable {
    let mode: VOPRF.Mode
    let context: [UInt8]

    init(_ mode: VOPRF.Mode) {
        self.mode = mode
        context = Array("OPRFV1-".utf8) + [mode.rawValue] + Array("-".utf8) + Array(VOPRF.identifier.utf8)
    }

    func hashToGroup(_ input: [UInt8]) throws -> Group.Element {
        try Group.hashToGroup(input, dst: Array("HashToGroup-".utf8) + context)
    }

    func hashToScalar(_ input: [UInt8]) throws -> Group.Scalar {
        try Group.hashToScalar(input, dst: Array("HashToScalar-".utf8) + context)
    }

    /// The input element of `input`; the identity is refused (InvalidInputError).
    func inputElement(_ input: [UInt8]) throws -> Group.Element {
        guard input.count <= 65_535 else {
            throw PrivacyPassError(.invalidInput, "an OPRF input is at most 65535 bytes, got \(input.count)")
        }
        let element = try hashToGroup(input)
        guard !element.isIdentity else {
            throw PrivacyPassError(.invalidInput, "this input hashes to the identity element; use another input")
        }
        return element
    }

    /// m = HashToScalar("Info" ‖ I2OSP(len(info), 2) ‖ info), the POPRF tweak.
    func infoScalar(_ info: [UInt8]) throws -> Group.Scalar {
        try hashToScalar(Array("Info".utf8) + lengthPrefixed(info))
    }

    /// The Finalize/Evaluate hash (RFC 9497 §3.3.1, §3.3.3): SHA-512 of the length-prefixed input, the info
    /// (POPRF only) and the unblinded element, then "Finalize".
    func outputHash(input: [UInt8], info: [UInt8], unblinded: Group.Element) -> Data {
        var hash = SHA512()
        hash.update(data: lengthPrefixed(input))
        if mode == .poprf { hash.update(data: lengthPrefixed(info)) }
        hash.update(data: lengthPrefixed(unblinded.bytes))
        hash.update(data: Array("Finalize".utf8))
        return hash.finalize().rawRepresentation
    }

    // MARK: - DLEQ proofs (RFC 9497 §2.2)

    /// ComputeComposites (with k: ComputeCompositesFast, Z = k·M).
    func composites(
        publicKey b: Group.Element, c: [Group.Element], d: [Group.Element], k: Group.Scalar?
    ) throws -> (m: Group.Element, z: Group.Element) {
        let seedDST = Array("Seed-".utf8) + context
        var seedHash = SHA512()
        seedHash.update(data: lengthPrefixed(b.bytes))
        seedHash.update(data: lengthPrefixed(seedDST))
        let seed = [UInt8](seedHash.finalize().rawRepresentation)
        var m = Group.Element.identity
        var z = Group.Element.identity
        for i in c.indices {
            let transcript =
                lengthPrefixed(seed) + [UInt8(i >> 8), UInt8(i & 0xFF)] + lengthPrefixed(c[i].bytes)
                + lengthPrefixed(d[i].bytes) + Array("Composite".utf8)
            let di = try hashToScalar(transcript)
            m = try Group.add(Group.multiply(di, c[i]), m)
            if k == nil { z = try Group.add(Group.multiply(di, d[i]), z) }
        }
        if let k { z = try Group.multiply(k, m) }
        return (m, z)
    }

    /// ComputeChallenge: HashToScalar of the length-prefixed B, M, Z, t2, t3 and "Challenge".
    func challenge(_ elements: [Group.Element]) throws -> Group.Scalar {
        try hashToScalar(elements.flatMap { lengthPrefixed($0.bytes) } + Array("Challenge".utf8))
    }

    /// GenerateProof(k, A = G, B, C, D, r) → c ‖ s.
    func generateProof(
        k: Group.Scalar, publicKey b: Group.Element, c: [Group.Element], d: [Group.Element], r: Group.Scalar
    ) throws -> Data {
        let (m, z) = try composites(publicKey: b, c: c, d: d, k: k)
        let t2 = try Group.multiplyBase(r)
        let t3 = try Group.multiply(r, m)
        let challenge = try challenge([b, m, z, t2, t3])
        let s = Group.sub(r, Group.mul(challenge, k))
        return Data(challenge.bytes + s.bytes)
    }

    /// VerifyProof(A = G, B, C, D, proof): true only if the proof parses and verifies.
    func verifyProof(
        publicKey b: Group.Element, c: [Group.Element], d: [Group.Element], proof: some DataProtocol
    ) -> Bool {
        let bytes = [UInt8](proof)
        guard bytes.count == VOPRF.proofByteCount,
            let challenge = try? Group.scalar(bytes[0..<32], what: "the proof's challenge"),
            let s = try? Group.scalar(bytes[32..<64], what: "the proof's response"),
            let mz = try? composites(publicKey: b, c: c, d: d, k: nil),
            // A zero c or s makes a product the identity, which libsodium refuses: such a proof is rejected.
            let t2 = try? Group.add(Group.multiplyBase(s), Group.multiply(challenge, b)),
            let t3 = try? Group.add(Group.multiply(s, mz.m), Group.multiply(challenge, mz.z)),
            let expected = try? self.challenge([b, mz.m, mz.z, t2, t3])
        else { return false }
        return safeCompare(expected.bytes, challenge.bytes)
    }
}

/// I2OSP(len(bytes), 2) ‖ bytes; callers keep `bytes` at most 65535 long.
func lengthPrefixed(_ bytes: [UInt8]) -> [UInt8] {
    [UInt8(bytes.count >> 8 & 0xFF), UInt8(bytes.count & 0xFF)] + bytes
}

/// A secret scalar that is wiped when the last copy of its owner goes away.
///
/// Best effort: the arithmetic works on `[UInt8]` copies (``scalar``), which Swift frees without wiping; only the
/// long-lived copy held here (a private key, a pending blind) is wiped.
///
/// `@unchecked Sendable`: the bytes are written once in `init` and only read afterwards (the wipe in `deinit`
/// runs when no other reference exists).
final class SecretScalar: @unchecked Sendable {
    private var bytes: [UInt8]

    init(_ scalar: Group.Scalar) { bytes = scalar.bytes }

    var scalar: Group.Scalar { Group.Scalar(bytes: bytes) }

    deinit { Group.wipe(&bytes) }
}

extension VOPRF {
    /// A server's OPRF key skS: a nonzero scalar. The same key serves every mode; the mode only changes
    /// ``init(seed:info:mode:)`` (DeriveKeyPair's domain separation).
    public struct PrivateKey: Sendable {
        let secret: SecretScalar
        /// pkS = skS · G.
        public let publicKey: PublicKey

        /// A random key from the system CSPRNG.
        public init() {
            self.init(using: SystemRandom())
        }

        /// A random key from `random` (RandomScalar: 64 bytes reduced modulo the group order, never zero);
        /// `@_spi(Testing)`, for deterministic tests.
        @_spi(Testing)
        public init(using random: some SecureRandomSource) {
            Group.readyOrTrap()
            let scalar = Group.randomScalar(using: random)
            // A nonzero scalar times the generator is never the identity.
            self.init(checked: scalar)
        }

        /// DeriveKeyPair(seed, info) (RFC 9497 §3.2.1): the key a seed and an info string determine, in `mode`'s
        /// domain. The seed must be 32 secret random bytes; the info string (at most 65535 bytes) may be public.
        public init(seed: some DataProtocol, info: some DataProtocol, mode: Mode) throws {
            let seed = [UInt8](seed)
            let info = [UInt8](info)
            guard seed.count == VOPRF.scalarByteCount else {
                throw PrivacyPassError(.invalidInput, "a DeriveKeyPair seed must be 32 bytes, got \(seed.count)")
            }
            guard info.count <= 65_535 else {
                throw PrivacyPassError(.invalidInput, "a DeriveKeyPair info string is at most 65535 bytes")
            }
            try Group.ready()
            let suite = Suite(mode)
            let deriveInput = seed + lengthPrefixed(info)
            let dst = Array("DeriveKeyPair".utf8) + suite.context
            for counter in 0...255 {
                let scalar = try Group.hashToScalar(deriveInput + [UInt8(counter)], dst: dst)
                if !scalar.isZero {
                    self.init(checked: scalar)
                    return
                }
            }
            throw PrivacyPassError(
                .invalidInput, "DeriveKeyPair found no nonzero scalar in 256 tries; use another seed")
        }

        /// A key from its 32-byte serialization (SerializeScalar: little-endian, below the group order, nonzero).
        public init(rawRepresentation: some DataProtocol) throws {
            let scalar = try Group.scalar(rawRepresentation, what: "an OPRF private key")
            guard !scalar.isZero else {
                throw PrivacyPassError(.invalidScalar, "an OPRF private key cannot be zero")
            }
            self.init(checked: scalar)
        }

        private init(checked scalar: Group.Scalar) {
            secret = SecretScalar(scalar)
            do {
                publicKey = PublicKey(element: try Group.multiplyBase(scalar))
            } catch {
                preconditionFailure("a nonzero scalar gave the identity public key: \(error)")
            }
        }

        /// The 32-byte serialization; keep it as secret as the key.
        public var rawRepresentation: Data { Data(secret.scalar.bytes) }

        var scalar: Group.Scalar { secret.scalar }
    }

    /// A server's public key pkS: a ristretto255 element (never the identity).
    public struct PublicKey: Sendable, Hashable {
        let element: Group.Element

        init(element: Group.Element) { self.element = element }

        /// A public key from its 32-byte encoding; refuses non-canonical encodings and the identity.
        public init(rawRepresentation: some DataProtocol) throws {
            element = try Group.element(rawRepresentation, what: "an OPRF public key")
        }

        /// The 32-byte encoding (SerializeElement).
        public var rawRepresentation: Data { Data(element.bytes) }

        public static func == (lhs: Self, rhs: Self) -> Bool { lhs.element.bytes == rhs.element.bytes }
        public func hash(into hasher: inout Hasher) { hasher.combine(element.bytes) }
    }
}
