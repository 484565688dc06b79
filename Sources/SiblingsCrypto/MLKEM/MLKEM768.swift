import Foundation

/// ML-KEM-768 (FIPS 203), written in Swift, with CryptoKit's names (`MLKEM768`): keys are kept as the
/// 64-byte seed d ‖ z (``PrivateKey/seedRepresentation``) or CryptoKit's integrity-checked form.
public enum MLKEM768 {
    public static let publicKeyByteCount = 1184
    /// The expanded decapsulation key dk = dk_PKE ‖ ek ‖ H(ek) ‖ z (FIPS 203, Algorithm 16).
    public static let expandedPrivateKeyByteCount = 2400
    /// The seed d ‖ z from which KeyGen_internal derives everything.
    public static let seedByteCount = 64
    public static let ciphertextByteCount = 1088
    public static let sharedSecretByteCount = 32

    /// An encapsulation key, checked and expanded once: t̂, the matrix Â and H(ek) are kept with it,
    /// so each encapsulation samples only its own noise.
    public struct PublicKey: Sendable, Equatable {
        /// ek (1184 bytes).
        public let rawRepresentation: Data
        let tHat: [UInt32]
        let matrix: [UInt32]
        /// H(ek) = SHA3-256(ek).
        let hash: Data

        /// Decodes ek and runs the encapsulation-key modulus check (FIPS 203, section 7.2): every
        /// coefficient must already be reduced mod q, or the key is refused with `.invalidEncoding`.
        public init(rawRepresentation: some DataProtocol) throws {
            guard rawRepresentation.count == MLKEM768.publicKeyByteCount else {
                throw CryptoError.incorrectKeySize(
                    "an ML-KEM-768 encapsulation key", expected: MLKEM768.publicKeyByteCount,
                    got: rawRepresentation.count)
            }
            let bytes = rawRepresentation.asData
            var tHat = [UInt32](repeating: 0, count: 768)
            let reduced = bytes.withUnsafeBytes { raw in
                tHat.withUnsafeMutableBufferPointer { t in
                    var canonical = true
                    for i in 0..<3 {
                        MLKEMMath.decode(raw.baseAddress! + i * 384, bits: 12, into: t.baseAddress! + i * 256)
                    }
                    for value in t where value >= MLKEMMath.q { canonical = false }
                    return canonical
                }
            }
            guard reduced else {
                throw CryptoError(
                    .invalidEncoding,
                    "the ML-KEM-768 encapsulation key has a coefficient that is not reduced mod q (FIPS 203 modulus check)"
                )
            }
            var matrix = [UInt32](repeating: 0, count: 9 * 256)
            bytes.withUnsafeBytes { raw in
                matrix.withUnsafeMutableBufferPointer { m in
                    KPKE.expandMatrix(rho: UnsafeRawBufferPointer(rebasing: raw[1152..<1184]), into: m.baseAddress!)
                }
            }
            self.rawRepresentation = bytes
            self.tHat = tHat
            self.matrix = matrix
            // H(ek) = SHA3-256(ek) (FIPS 203, section 4.1).
            self.hash = SHA3_256.hash(data: bytes).rawRepresentation
        }

        init(rawRepresentation: Data, tHat: [UInt32], matrix: [UInt32]) {
            self.rawRepresentation = rawRepresentation
            self.tHat = tHat
            self.matrix = matrix
            self.hash = SHA3_256.hash(data: rawRepresentation).rawRepresentation
        }

        /// ML-KEM.Encaps (FIPS 203, Algorithm 20) with 32 fresh random bytes. It does not fail; it throws, as
        /// CryptoKit's does, so that every KEM's `encapsulate()` reads the same.
        public func encapsulate() throws -> KEM.EncapsulationResult {
            withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { m in
                defer { OpenSSLMemory.cleanse(m) }
                SecureRandom.fill(m)
                return encapsulate(m: UnsafeRawBufferPointer(m))
            }
        }

        /// ML-KEM.Encaps_internal (FIPS 203, Algorithm 17) with the given 32-byte `randomness` m: the
        /// derandomized form, for known-answer tests only (`@_spi(Testing)`): the same m twice gives the same
        /// shared secret to anyone who sees both ciphertexts.
        @_spi(Testing)
        public func encapsulate(randomness: some DataProtocol) throws -> KEM.EncapsulationResult {
            guard randomness.count == 32 else {
                throw CryptoError.incorrectParameterSize(
                    "ML-KEM encapsulation randomness", expected: "32", got: randomness.count)
            }
            let m = SecureBytes(randomness)
            return m.withUnsafeBytes { encapsulate(m: $0) }
        }

        func encapsulate(m: UnsafeRawBufferPointer) -> KEM.EncapsulationResult {
            withUnsafeTemporaryAllocation(byteCount: 64, alignment: 8) { kr in
                defer { OpenSSLMemory.cleanse(kr) }
                // (K, r) = G(m ‖ H(ek)), hashed straight into the wiped buffer.
                hash.withUnsafeBytes { DigestContext.keccak(.sha3_512, m, $0, into: kr) }
                let ciphertext = Data.uninitialized(count: KPKE.ciphertextBytes) { out in
                    encrypt(m: m, r: UnsafeRawBufferPointer(rebasing: kr[32..<64]), into: out.baseAddress!)
                }
                return KEM.EncapsulationResult(
                    sharedSecret: SymmetricKey(secureBytes: SecureBytes(UnsafeRawBufferPointer(rebasing: kr[0..<32]))),
                    encapsulated: ciphertext)
            }
        }

        func encrypt(m: UnsafeRawBufferPointer, r: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer) {
            tHat.withUnsafeBufferPointer { t in
                matrix.withUnsafeBufferPointer { a in
                    KPKE.encrypt(tHat: t.baseAddress!, matrix: a.baseAddress!, m: m, r: r, into: out)
                }
            }
        }

        public static func == (lhs: Self, rhs: Self) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }
    }

    /// A decapsulation key, kept as its seed d ‖ z with ŝ and z expanded.
    public struct PrivateKey: Sendable {
        /// ŝ in the NTT domain (768 coefficients), wiped when the key goes away.
        let sHat: SecureBytes
        /// z, the implicit-rejection secret.
        let z: SecureBytes
        /// d ‖ z.
        let seed: SecureBytes
        public let publicKey: PublicKey

        /// A fresh key from 64 random bytes d ‖ z.
        public init() {
            self.init(source: SystemRandom())
        }

        /// A key from `source`'s next 64 bytes, taken as d ‖ z (`@_spi(Testing)`: tests inject a deterministic
        /// source; production keys come from ``init()``).
        @_spi(Testing)
        public init(source: some SecureRandomSource) {
            let seed = SecureBytes(count: 64) { source.fill($0) }
            self.init(validSeed: seed)
        }

        /// ML-KEM.KeyGen_internal(d, z) (FIPS 203, Algorithm 16) from the 64-byte seed d ‖ z. With
        /// `publicKey`, the key made from the seed must have that public key, or
        /// ``CryptoError/Code/publicKeyMismatch`` is thrown (CryptoKit's `init(seedRepresentation:publicKey:)`).
        public init(seedRepresentation: some DataProtocol, publicKey: PublicKey? = nil) throws {
            guard seedRepresentation.count == MLKEM768.seedByteCount else {
                throw CryptoError.incorrectKeySize(
                    "an ML-KEM-768 seed (d ‖ z)", expected: MLKEM768.seedByteCount, got: seedRepresentation.count)
            }
            self.init(validSeed: SecureBytes(seedRepresentation))
            if let publicKey, publicKey != self.publicKey { throw CryptoError.publicKeyMismatch("ML-KEM-768 key's") }
        }

        /// The key from CryptoKit's integrity-checked form, the seed d ‖ z then SHA3-256 of the public key (96
        /// bytes); a hash that does not match the key the seed gives throws ``CryptoError/Code/publicKeyMismatch``.
        public init(integrityCheckedRepresentation: some DataProtocol) throws {
            self = try fromIntegrityChecked(
                integrityCheckedRepresentation, seedByteCount: MLKEM768.seedByteCount, what: "ML-KEM-768 key",
                make: { try PrivateKey(seedRepresentation: $0) }, publicKey: { $0.publicKey.rawRepresentation })
        }

        private init(validSeed: SecureBytes) {
            var tHat = [UInt32](repeating: 0, count: 768)
            var matrix = [UInt32](repeating: 0, count: 9 * 256)
            var rho = Data()
            let sHat = SecureBytes(count: 768 * 4) { sBytes in
                validSeed.withUnsafeBytes { seed in
                    tHat.withUnsafeMutableBufferPointer { t in
                        matrix.withUnsafeMutableBufferPointer { a in
                            rho = KPKE.keyGen(
                                d: UnsafeRawBufferPointer(rebasing: seed[0..<32]), tHat: t.baseAddress!,
                                matrix: a.baseAddress!, sHat: sBytes.bindMemory(to: UInt32.self).baseAddress!)
                        }
                    }
                }
            }
            var ek = Data(count: MLKEM768.publicKeyByteCount)
            ek.withUnsafeMutableBytes { out in
                tHat.withUnsafeBufferPointer { t in
                    for i in 0..<3 {
                        MLKEMMath.encode(t.baseAddress! + i * 256, bits: 12, into: out.baseAddress! + i * 384)
                    }
                }
                out.baseAddress!.advanced(by: 1152).copyMemory(from: Array(rho), byteCount: 32)
            }
            self.sHat = sHat
            self.z = validSeed.withUnsafeBytes { SecureBytes(UnsafeRawBufferPointer(rebasing: $0[32..<64])) }
            self.seed = validSeed
            self.publicKey = PublicKey(rawRepresentation: ek, tHat: tHat, matrix: matrix)
        }

        /// d ‖ z (64 bytes). Keep it secret.
        public var seedRepresentation: Data { seed.withUnsafeBytes { Data($0) } }

        /// d ‖ z ‖ SHA3-256(ek) (96 bytes), CryptoKit's form for storing a key. Keep it secret.
        public var integrityCheckedRepresentation: Data {
            seed.integrityChecked(publicKey: publicKey.rawRepresentation)
        }

        /// dk = ByteEncode12(ŝ) ‖ ek ‖ H(ek) ‖ z (2400 bytes), FIPS 203's expanded form, for the known-answer
        /// tests (`@_spi(Testing)`). Keep it secret.
        @_spi(Testing)
        public var expandedRepresentation: Data { MLKEM768.expanded(sHat: sHat, z: z, publicKey: publicKey) }

        /// ML-KEM.Decaps (FIPS 203, Algorithms 18 and 21). A ciphertext of the wrong length is refused
        /// with `.incorrectParameterSize`; any other ciphertext yields a key: the real one, or, when the
        /// re-encryption does not match, the implicit-rejection key J(z ‖ c), chosen without a branch.
        public func decapsulate(_ ciphertext: some DataProtocol) throws -> SymmetricKey {
            try MLKEM768.decapsulate(ciphertext, sHat: sHat, z: z, publicKey: publicKey)
        }
    }

    /// A decapsulation key decoded from FIPS 203's 2400-byte expanded form dk, which holds no seed: for the
    /// NIST decapsulation known-answer tests only (`@_spi(Testing)`); keys are kept as seeds.
    @_spi(Testing)
    public struct ExpandedPrivateKey: Sendable {
        let sHat: SecureBytes
        let z: SecureBytes
        public let publicKey: PublicKey

        /// Decodes dk and runs the decapsulation-key checks of FIPS 203, section 7.3: the embedded ek passes
        /// the modulus check, and H(ek) matches the stored hash.
        public init(expandedRepresentation: some DataProtocol) throws {
            guard expandedRepresentation.count == MLKEM768.expandedPrivateKeyByteCount else {
                throw CryptoError.incorrectKeySize(
                    "an expanded ML-KEM-768 decapsulation key", expected: MLKEM768.expandedPrivateKeyByteCount,
                    got: expandedRepresentation.count)
            }
            let dk = SecureBytes(expandedRepresentation)
            let publicKey = try dk.withUnsafeBytes { try PublicKey(rawRepresentation: Data($0[1152..<2336])) }
            let hashMatches = dk.withUnsafeBytes { raw in
                publicKey.hash.withUnsafeBytes { hash in
                    safeCompare(UnsafeRawBufferPointer(rebasing: raw[2336..<2368]), hash)
                }
            }
            guard hashMatches else {
                throw CryptoError(
                    .invalidEncoding,
                    "the expanded ML-KEM-768 key's H(ek) does not match its ek (FIPS 203 hash check): the key is corrupt"
                )
            }
            self.sHat = SecureBytes(count: 768 * 4) { sBytes in
                dk.withUnsafeBytes { raw in
                    let s = sBytes.bindMemory(to: UInt32.self).baseAddress!
                    for i in 0..<3 { MLKEMMath.decode12(raw.baseAddress! + i * 384, into: s + i * 256) }
                }
            }
            self.z = dk.withUnsafeBytes { SecureBytes(UnsafeRawBufferPointer(rebasing: $0[2368..<2400])) }
            self.publicKey = publicKey
        }

        /// dk (2400 bytes). Keep it secret.
        public var expandedRepresentation: Data { MLKEM768.expanded(sHat: sHat, z: z, publicKey: publicKey) }

        /// ML-KEM.Decaps, as ``PrivateKey/decapsulate(_:)``.
        public func decapsulate(_ ciphertext: some DataProtocol) throws -> SymmetricKey {
            try MLKEM768.decapsulate(ciphertext, sHat: sHat, z: z, publicKey: publicKey)
        }
    }

    /// dk = ByteEncode12(ŝ) ‖ ek ‖ H(ek) ‖ z.
    static func expanded(sHat: SecureBytes, z: SecureBytes, publicKey: PublicKey) -> Data {
        var out = Data(count: MLKEM768.expandedPrivateKeyByteCount)
        out.withUnsafeMutableBytes { buffer in
            sHat.withUnsafeBytes { s in
                let coefficients = s.bindMemory(to: UInt32.self).baseAddress!
                for i in 0..<3 {
                    MLKEMMath.encode(coefficients + i * 256, bits: 12, into: buffer.baseAddress! + i * 384)
                }
            }
        }
        out.replaceSubrange(1152..<2336, with: publicKey.rawRepresentation)
        out.replaceSubrange(2336..<2368, with: publicKey.hash)
        z.withUnsafeBytes { out.replaceSubrange(2368..<2400, with: $0) }
        return out
    }

    /// ML-KEM.Decaps (FIPS 203, Algorithms 18 and 21) with the decapsulation key's parts.
    static func decapsulate(
        _ ciphertext: some DataProtocol, sHat: SecureBytes, z: SecureBytes, publicKey: PublicKey
    ) throws -> SymmetricKey {
        guard ciphertext.count == MLKEM768.ciphertextByteCount else {
            throw CryptoError.incorrectParameterSize(
                "an ML-KEM-768 ciphertext", expected: "\(MLKEM768.ciphertextByteCount)", got: ciphertext.count)
        }
        let c = ciphertext.asData
        let shared = SecureBytes(count: 32) { result in
            withUnsafeTemporaryAllocation(byteCount: 32 + 64 + 32 + KPKE.ciphertextBytes, alignment: 8) { scratch in
                defer { OpenSSLMemory.cleanse(scratch) }
                let m = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<32])
                let kr = UnsafeMutableRawBufferPointer(rebasing: scratch[32..<96])
                let rejection = UnsafeMutableRawBufferPointer(rebasing: scratch[96..<128])
                let reencrypted = UnsafeMutableRawBufferPointer(rebasing: scratch[128...])
                c.withUnsafeBytes { cBytes in
                    sHat.withUnsafeBytes { s in
                        KPKE.decrypt(
                            sHat: s.bindMemory(to: UInt32.self).baseAddress!, ciphertext: cBytes.baseAddress!,
                            into: m)
                    }
                    // (K′, r′) = G(m′ ‖ h); K̄ = J(z ‖ c), each hashed straight into wiped memory.
                    publicKey.hash.withUnsafeBytes {
                        DigestContext.keccak(.sha3_512, UnsafeRawBufferPointer(m), $0, into: kr)
                    }
                    z.withUnsafeBytes { DigestContext.keccak(.shake256, $0, cBytes, into: rejection) }
                    publicKey.encrypt(
                        m: UnsafeRawBufferPointer(m), r: UnsafeRawBufferPointer(rebasing: kr[32..<64]),
                        into: reencrypted.baseAddress!)
                    // mask = 0xFF when c = c', else 0x00, computed without a branch.
                    let mask = ConstantTime.equalMask(cBytes, UnsafeRawBufferPointer(reencrypted))
                    for index in 0..<32 {
                        result[index] = (kr[index] & mask) | (rejection[index] & ~mask)
                    }
                }
            }
        }
        return SymmetricKey(secureBytes: shared)
    }
}
