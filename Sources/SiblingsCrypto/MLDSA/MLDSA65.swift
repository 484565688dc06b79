import Foundation

/// ML-DSA-65 (FIPS 204, the Module-Lattice-Based Digital Signature Standard, parameter set ML-DSA-65:
/// security category 3), written in Swift.
///
/// Pure ML-DSA only (FIPS 204, Algorithms 2 and 3): the message is signed as M′ = 0 ‖ |ctx| ‖ ctx ‖ M
/// with an optional context string of at most 255 bytes. Signing is hedged by default (32 fresh random
/// bytes mixed into the per-signature seed, FIPS 204 section 3.4); the deterministic variant is there
/// for known-answer tests and for callers that must not depend on a random source.
///
/// Keys: the 32-byte seed ξ is the private key's canonical form (``PrivateKey/seedRepresentation``);
/// ``PrivateKey/expandedRepresentation`` is FIPS 204's 4032-byte skEncode form.
public enum MLDSA65 {
    /// Bytes of an encoded public key (pkEncode, FIPS 204 Algorithm 22).
    public static let publicKeyByteCount = 1952
    /// Bytes of an encoded private key (skEncode, FIPS 204 Algorithm 24).
    public static let privateKeyByteCount = 4032
    /// Bytes of a signature (sigEncode, FIPS 204 Algorithm 26).
    public static let signatureByteCount = 3309
    /// Bytes of the key-generation seed ξ.
    public static let seedByteCount = 32

    // FIPS 204, Table 1, ML-DSA-65.
    static let k = 6
    static let l = 5
    static let tau = 49
    static let beta: Int32 = 196
    static let omega: Int32 = 55
    static let challengeByteCount = 48
    static let maxContextByteCount = 255
}

// MARK: - Private key

extension MLDSA65 {
    /// An ML-DSA-65 private key, kept with everything signing needs precomputed: tr, Â, and s1, s2, t0 in
    /// NTT form (in wiped memory), so repeated signing only does the per-signature work.
    public struct PrivateKey: Sendable {
        /// ξ.
        let seed: SecureBytes
        /// skEncode(ρ, K, tr, s1, s2, t0); K is bytes 32..<64.
        let expanded: SecureBytes
        /// NTT(s1) ‖ NTT(s2) ‖ NTT(t0) as l + 2k polynomials of `Int32`.
        let transformedSecrets: SecureBytes
        let cachedPublicKey: PublicKey

        /// A fresh key from a random ξ (``SystemRandom``).
        public init() {
            self.init(source: SystemRandom())
        }

        /// A key from ξ = `source`'s next 32 bytes (`@_spi(Testing)`: tests inject a deterministic source; production keys come from ``init()``).
        @_spi(Testing)
        public init(source: some SecureRandomSource) {
            self.init(validSeed: SecureBytes(count: MLDSA65.seedByteCount) { source.fill($0) })
        }

        /// ML-DSA.KeyGen_internal(ξ) (FIPS 204, Algorithm 6) from the 32-byte seed ξ. With `publicKey`, the
        /// key made from the seed must have that public key, or ``CryptoError/Code/publicKeyMismatch`` is
        /// thrown (CryptoKit's `init(seedRepresentation:publicKey:)`).
        public init(seedRepresentation: some DataProtocol, publicKey: PublicKey? = nil) throws {
            guard seedRepresentation.count == MLDSA65.seedByteCount else {
                throw CryptoError.incorrectKeySize(
                    "an ML-DSA-65 private key seed (ξ)", expected: MLDSA65.seedByteCount,
                    got: seedRepresentation.count)
            }
            self.init(validSeed: SecureBytes(seedRepresentation))
            if let publicKey, publicKey != self.publicKey { throw CryptoError.publicKeyMismatch("ML-DSA-65 key's") }
        }

        /// The key from CryptoKit's integrity-checked form, ξ then SHA3-256 of the public key (64 bytes); a
        /// hash that does not match the key ξ gives throws ``CryptoError/Code/publicKeyMismatch``.
        public init(integrityCheckedRepresentation: some DataProtocol) throws {
            self = try fromIntegrityChecked(
                integrityCheckedRepresentation, seedByteCount: MLDSA65.seedByteCount, what: "ML-DSA-65 key",
                make: { try PrivateKey(seedRepresentation: $0) }, publicKey: { $0.publicKey.rawRepresentation })
        }

        private init(validSeed: SecureBytes) {
            seed = validSeed
            (expanded, transformedSecrets, cachedPublicKey) = validSeed.withUnsafeBytes {
                MLDSA65.generateKey(seed: $0)
            }
        }

        /// ξ, the 32-byte seed the key was generated from. Keep it secret.
        public var seedRepresentation: Data { seed.withUnsafeBytes { Data($0) } }

        /// ξ ‖ SHA3-256(public key) (64 bytes), CryptoKit's form for storing a key. Keep it secret.
        public var integrityCheckedRepresentation: Data {
            seed.integrityChecked(publicKey: publicKey.rawRepresentation)
        }

        /// The 4032-byte skEncode form (FIPS 204, Algorithm 24). Keep it secret.
        public var expandedRepresentation: Data { expanded.withUnsafeBytes { Data($0) } }

        /// The matching public key.
        public var publicKey: PublicKey { cachedPublicKey }

        /// A hedged pure ML-DSA signature (FIPS 204, Algorithm 2) of `message` under `context`, with
        /// rnd = 32 bytes from ``SystemRandom``. M′ = 0 ‖ |ctx| ‖ ctx ‖ M; a context longer than 255 bytes
        /// throws ``CryptoError/Code/invalidParameter``.
        public func signature(for message: some DataProtocol, context: some DataProtocol) throws -> Data {
            var randomness = [UInt8](repeating: 0, count: 32)
            defer { randomness.withUnsafeMutableBytes { OpenSSLMemory.cleanse($0) } }
            randomness.withUnsafeMutableBytes { SystemRandom().fill($0) }
            return try signature(for: message, context: context, randomness: randomness)
        }

        /// A hedged pure ML-DSA signature (FIPS 204, Algorithm 2) of `message` with the empty context.
        public func signature(for message: some DataProtocol) throws -> Data {
            try signature(for: message, context: Data())
        }

        /// The deterministic variant of pure ML-DSA signing (FIPS 204, Algorithm 2 with rnd = 0^32, section
        /// 3.4), as the NIST known-answer tests use: the same key, message and context always give the
        /// same signature. `@_spi(Testing)`: hedged signing (``signature(for:context:)``) resists fault and
        /// side-channel attacks that a fixed rnd makes easier, so production code signs hedged.
        @_spi(Testing)
        public func deterministicSignature(for message: some DataProtocol, context: some DataProtocol) throws -> Data {
            try signature(for: message, context: context, randomness: [UInt8](repeating: 0, count: 32))
        }

        /// Pure ML-DSA signing (FIPS 204, Algorithm 2, then ML-DSA.Sign_internal, Algorithm 7) with an
        /// explicit 32-byte rnd (anything else throws ``CryptoError/Code/incorrectParameterSize``). For
        /// known-answer tests only (`@_spi(Testing)`).
        @_spi(Testing)
        public func signature(
            for message: some DataProtocol, context: some DataProtocol, randomness: some DataProtocol
        ) throws -> Data {
            guard context.count <= MLDSA65.maxContextByteCount else {
                throw CryptoError(
                    .invalidParameter,
                    "an ML-DSA context string must be at most 255 bytes, got \(context.count); "
                        + "use a shorter context (a hash of a longer one, for example)")
            }
            guard randomness.count == 32 else {
                throw CryptoError.incorrectParameterSize(
                    "ML-DSA signing randomness (rnd)", expected: "32", got: randomness.count)
            }
            // μ = H(BytesToBits(tr) ‖ M′, 64) (FIPS 204, Algorithm 7, line 6).
            let mu = MLDSA65.messageRepresentative(tr: cachedPublicKey.storage.tr, context: context, message: message)
            var rnd = [UInt8](repeating: 0, count: 32)
            defer { rnd.withUnsafeMutableBytes { OpenSSLMemory.cleanse($0) } }
            rnd.withUnsafeMutableBytes { buffer in
                var offset = 0
                for region in randomness.regions {
                    region.withUnsafeBytes { source in
                        guard let base = source.baseAddress else { return }
                        (buffer.baseAddress! + offset).copyMemory(from: base, byteCount: source.count)
                    }
                    offset += region.count
                }
            }
            return Data.uninitialized(count: MLDSA65.signatureByteCount) { out in
                mu.withUnsafeBytes { mu in
                    rnd.withUnsafeBytes { rnd in
                        MLDSA65.sign(
                            into: out.baseAddress!.assumingMemoryBound(to: UInt8.self), key: self, mu: mu, rnd: rnd)
                    }
                }
            }
        }
    }
}

// MARK: - Public key

extension MLDSA65 {
    /// An ML-DSA-65 public key (pkEncode form, 1952 bytes), kept with Â, NTT(t1·2^d) and tr precomputed
    /// so each verification only does the per-signature work.
    public struct PublicKey: Sendable, Equatable {
        let storage: PublicKeyStorage

        init(storage: PublicKeyStorage) { self.storage = storage }

        /// pkDecode (FIPS 204, Algorithm 23) of a 1952-byte public key; other lengths throw
        /// ``CryptoError/Code/incorrectKeySize``. Every 1952-byte string is a well-formed public key.
        public init(rawRepresentation: some DataProtocol) throws {
            guard rawRepresentation.count == MLDSA65.publicKeyByteCount else {
                throw CryptoError.incorrectKeySize(
                    "an ML-DSA-65 public key", expected: MLDSA65.publicKeyByteCount, got: rawRepresentation.count)
            }
            storage = PublicKeyStorage(encoded: rawRepresentation.asData, matrix: nil)
        }

        /// The 1952-byte pkEncode(ρ, t1).
        public var rawRepresentation: Data { storage.encoded }

        /// Pure ML-DSA verification (FIPS 204, Algorithm 3, then ML-DSA.Verify_internal, Algorithm 8) of
        /// `signature` on `message` under `context`. Anything malformed — a signature that is not 3309
        /// bytes, a hint with more than ω ones, hint indices not strictly increasing, nonzero hint
        /// padding, ‖z‖∞ ≥ γ1 − β, a context over 255 bytes — gives false.
        public func isValidSignature(
            _ signature: some DataProtocol, for message: some DataProtocol, context: some DataProtocol
        ) -> Bool {
            guard signature.count == MLDSA65.signatureByteCount, context.count <= MLDSA65.maxContextByteCount
            else { return false }
            let mu = MLDSA65.messageRepresentative(tr: storage.tr, context: context, message: message)
            let bytes = signature.asData
            return bytes.withUnsafeBytes { sigma in
                mu.withUnsafeBytes { mu in
                    MLDSA65.verify(
                        signature: sigma.baseAddress!.assumingMemoryBound(to: UInt8.self), key: storage, mu: mu)
                }
            }
        }

        /// Pure ML-DSA verification (FIPS 204, Algorithm 3) with the empty context.
        public func isValidSignature(_ signature: some DataProtocol, for message: some DataProtocol) -> Bool {
            isValidSignature(signature, for: message, context: Data())
        }

        public static func == (lhs: Self, rhs: Self) -> Bool { lhs.storage.encoded == rhs.storage.encoded }
    }

    /// A public key's encoding and its precomputed, immutable verification values.
    final class PublicKeyStorage: Sendable {
        /// pkEncode(ρ, t1).
        let encoded: Data
        /// Â = ExpandA(ρ), k·l polynomials in NTT form, coefficients in [0, q).
        let matrix: [Int32]
        /// NTT(t1 · 2^d), k polynomials, reduced.
        let t1Transformed: [Int32]
        /// tr = H(pk, 64).
        let tr: [UInt8]

        /// Decodes `encoded` (1952 bytes) and precomputes; `matrix` is Â when the caller already has it.
        init(encoded: Data, matrix: [Int32]?) {
            precondition(encoded.count == MLDSA65.publicKeyByteCount)
            self.encoded = encoded
            var tr = [UInt8](repeating: 0, count: 64)
            tr.withUnsafeMutableBytes { out in
                encoded.withUnsafeBytes { DigestContext.keccak(.shake256, $0, into: out) }
            }
            self.tr = tr
            var t1 = [Int32](repeating: 0, count: MLDSA65.k * 256)
            encoded.withUnsafeBytes { raw in
                let bytes = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
                t1.withUnsafeMutableBufferPointer { t1 in
                    MLDSAEncoding.decodePublicKey(bytes, t1: t1.baseAddress!)
                    for i in 0..<t1.count { t1[i] <<= MLDSAField.d }
                    MLDSAField.ntt(t1.baseAddress!, count: MLDSA65.k)
                    for i in 0..<t1.count { t1[i] = MLDSAField.reduce32(t1[i]) }
                }
            }
            t1Transformed = t1
            self.matrix =
                matrix
                ?? encoded.withUnsafeBytes { raw in
                    MLDSASampling.expandA(
                        rho: UnsafeRawBufferPointer(rebasing: raw[0..<32]), rows: MLDSA65.k, columns: MLDSA65.l)
                }
        }
    }
}

// MARK: - The internal algorithms (FIPS 204, Algorithms 6, 7 and 8)

extension MLDSA65 {
    /// ML-DSA.KeyGen_internal(ξ) (FIPS 204, Algorithm 6): the skEncode bytes, NTT(s1) ‖ NTT(s2) ‖ NTT(t0),
    /// and the public key with its precomputed values.
    static func generateKey(seed xi: UnsafeRawBufferPointer) -> (SecureBytes, SecureBytes, PublicKey) {
        // (ρ, ρ′, K) = H(ξ ‖ IntegerToBytes(k, 1) ‖ IntegerToBytes(l, 1), 128).
        var seeds = [UInt8](repeating: 0, count: 128)
        seeds.withUnsafeMutableBytes { out in
            withUnsafeBytes(of: (UInt8(k), UInt8(l))) { DigestContext.keccak(.shake256, xi, $0, into: out) }
        }
        defer { seeds.withUnsafeMutableBytes { OpenSSLMemory.cleanse($0) } }

        let polynomials = l + k + k + k  // s1, s2, t (then t0), t1
        let scratch = UnsafeMutablePointer<Int32>.allocate(capacity: polynomials * 256)
        defer {
            OpenSSLMemory.cleanse(UnsafeMutableRawBufferPointer(start: scratch, count: polynomials * 256 * 4))
            scratch.deallocate()
        }
        let s1 = scratch
        let s2 = s1 + l * 256
        let t = s2 + k * 256
        let t1 = t + k * 256

        return seeds.withUnsafeMutableBytes { seeds in
            let rho = UnsafeMutableRawBufferPointer(rebasing: seeds[0..<32])
            let rhoPrime = UnsafeRawBufferPointer(rebasing: seeds[32..<96])
            let key = UnsafeRawBufferPointer(rebasing: seeds[96..<128])
            // ρ is published in the public key.
            MLDSAConstantTime.declassify(rho, site: "keygen.rho")
            let matrix = MLDSASampling.expandA(rho: UnsafeRawBufferPointer(rho), rows: k, columns: l)
            MLDSASampling.expandS(rhoPrime: rhoPrime, s1: s1, l: l, s2: s2, k: k)

            let transformed = SecureBytes(count: (l + 2 * k) * 256 * 4) { buffer in
                let hat = buffer.bindMemory(to: Int32.self).baseAddress!
                let s1Hat = hat
                let s2Hat = hat + l * 256
                let t0Hat = s2Hat + k * 256
                // t = NTT⁻¹(Â ∘ NTT(s1)) + s2, as coefficients in [0, q).
                s1Hat.update(from: s1, count: l * 256)
                MLDSAField.ntt(s1Hat, count: l)
                matrix.withUnsafeBufferPointer { matrix in
                    MLDSAField.multiplyMatrixVector(t, matrix: matrix.baseAddress!, vector: s1Hat, rows: k, columns: l)
                }
                MLDSAField.inverseNTT(t, count: k)
                for i in 0..<(k * 256) {
                    let value = MLDSAField.conditionalAddQ(MLDSAField.reduce32(t[i] &+ s2[i]))
                    // (t1, t0) = Power2Round(t); t0 replaces t.
                    let (high, low) = MLDSAField.power2Round(value)
                    t1[i] = high
                    t[i] = low
                }
                s2Hat.update(from: s2, count: k * 256)
                MLDSAField.ntt(s2Hat, count: k)
                t0Hat.update(from: t, count: k * 256)
                MLDSAField.ntt(t0Hat, count: k)
            }

            // t1 is published in the public key.
            MLDSAConstantTime.declassify(
                UnsafeMutableRawBufferPointer(start: t1, count: k * 256 * 4), site: "keygen.t1")
            var encoded = Data(count: publicKeyByteCount)
            encoded.withUnsafeMutableBytes { out in
                MLDSAEncoding.encodePublicKey(
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self), rho: UnsafeRawBufferPointer(rho), t1: t1)
            }
            let storage = PublicKeyStorage(encoded: encoded, matrix: matrix)
            let expanded = SecureBytes(count: privateKeyByteCount) { out in
                storage.tr.withUnsafeBytes { tr in
                    MLDSAEncoding.encodePrivateKey(
                        out.baseAddress!.assumingMemoryBound(to: UInt8.self), rho: UnsafeRawBufferPointer(rho),
                        key: key, tr: tr, s1: s1, s2: s2, t0: t)
                }
            }
            return (expanded, transformed, PublicKey(storage: storage))
        }
    }

    /// ML-DSA.Sign_internal (FIPS 204, Algorithm 7) from μ (64 bytes) and rnd (32 bytes), writing the
    /// 3309-byte signature to `out`.
    ///
    /// Constant time: y, w, c̃, c, z, cs1, cs2, ct0 and the hint are computed without branches or secret
    /// indices, for rejected candidates as for the accepted one. Each candidate's four rejection checks
    /// are computed over every coefficient and combined into one mask, and only that word is declassified
    /// (see ``MLDSAConstantTime``): which check failed, and a rejected candidate's c̃, stay secret. c̃, z
    /// and h become public only when the candidate is accepted and they are the signature.
    static func sign(
        into out: UnsafeMutablePointer<UInt8>, key: PrivateKey, mu: UnsafeRawBufferPointer,
        rnd: UnsafeRawBufferPointer
    ) {
        let polynomials = l + l + k + 1 + k  // y, ŷ then z, w then w − cs2, ĉ, scratch
        let intCount = polynomials * 256
        let byteCount = 64 + 48 + k * MLDSAEncoding.w1PolyByteCount  // ρ″, c̃, w1Encode(w1)
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: intCount * 4 + byteCount, alignment: 16)
        defer {
            OpenSSLMemory.cleanse(UnsafeMutableRawBufferPointer(start: scratch, count: intCount * 4 + byteCount))
            scratch.deallocate()
        }
        let y = scratch.bindMemory(to: Int32.self, capacity: intCount)
        let z = y + l * 256
        let w = z + l * 256
        let cHat = w + k * 256
        let work = cHat + 256
        let bytes = (scratch + intCount * 4).bindMemory(to: UInt8.self, capacity: byteCount)
        let rhoDoublePrime = UnsafeMutableRawBufferPointer(start: bytes, count: 64)
        let challenge = UnsafeMutableRawBufferPointer(start: bytes + 64, count: challengeByteCount)
        let w1Encoded = bytes + 64 + challengeByteCount

        // ρ″ = H(K ‖ rnd ‖ μ, 64) (line 7).
        key.expanded.withUnsafeBytes {
            DigestContext.keccak(
                .shake256, UnsafeRawBufferPointer(rebasing: $0[32..<64]), rnd, mu, into: rhoDoublePrime)
        }

        key.transformedSecrets.withUnsafeBytes { secrets in
            let s1Hat = secrets.baseAddress!.assumingMemoryBound(to: Int32.self)
            let s2Hat = s1Hat + l * 256
            let t0Hat = s2Hat + k * 256
            key.cachedPublicKey.storage.matrix.withUnsafeBufferPointer { matrix in
                var kappa = 0
                // FIPS 204 lets the loop run until a candidate is accepted (each is, with probability
                // about 1/5 for ML-DSA-65); 16-bit κ wraps only after 13 000 rejections in a row.
                while true {
                    // y = ExpandMask(ρ″, κ); w = NTT⁻¹(Â ∘ NTT(y)) (lines 11–12).
                    MLDSASampling.expandMask(
                        y, rhoDoublePrime: UnsafeRawBufferPointer(rhoDoublePrime), kappa: kappa, l: l)
                    kappa = (kappa + l) & 0xffff
                    z.update(from: y, count: l * 256)
                    MLDSAField.ntt(z, count: l)
                    MLDSAField.multiplyMatrixVector(w, matrix: matrix.baseAddress!, vector: z, rows: k, columns: l)
                    MLDSAField.inverseNTT(w, count: k)
                    for i in 0..<(k * 256) { w[i] = MLDSAField.conditionalAddQ(w[i]) }

                    // c̃ = H(μ ‖ w1Encode(HighBits(w)), λ/4) (lines 13–15); secret until accepted.
                    MLDSAEncoding.encodeHighBits(w1Encoded, w: w)
                    DigestContext.keccak(
                        .shake256, mu, UnsafeRawBufferPointer(start: w1Encoded, count: k * 128), into: challenge)
                    MLDSASampling.sampleInBallConstantTime(cHat, challenge: UnsafeRawBufferPointer(challenge), tau: tau)
                    MLDSAField.ntt(cHat)

                    // z = y + ⟨⟨c·s1⟩⟩; reject when ‖z‖∞ ≥ γ1 − β (lines 17, 19, 23).
                    MLDSAField.multiplyPolynomial(z, cHat, s1Hat, count: l)
                    MLDSAField.inverseNTT(z, count: l)
                    for i in 0..<(l * 256) { z[i] = MLDSAField.reduce32(z[i] &+ y[i]) }
                    var rejected = MLDSAField.normExceedsMask(z, count: l * 256, bound: MLDSAField.gamma1 - beta)

                    // r = w − ⟨⟨c·s2⟩⟩ (kept in w); r0 = LowBits(r); reject when ‖r0‖∞ ≥ γ2 − β (lines 18–23).
                    MLDSAField.multiplyPolynomial(work, cHat, s2Hat, count: k)
                    MLDSAField.inverseNTT(work, count: k)
                    for i in 0..<(k * 256) {
                        let difference = w[i] &- MLDSAField.reduce32(work[i])
                        w[i] = MLDSAField.conditionalSubtractQ(MLDSAField.conditionalAddQ(difference))
                        work[i] = MLDSAField.decompose(w[i]).r0
                    }
                    rejected |= MLDSAField.normExceedsMask(work, count: k * 256, bound: MLDSAField.gamma2 - beta)

                    // ⟨⟨c·t0⟩⟩; reject when ‖c·t0‖∞ ≥ γ2 (lines 25, 28).
                    MLDSAField.multiplyPolynomial(work, cHat, t0Hat, count: k)
                    MLDSAField.inverseNTT(work, count: k)
                    for i in 0..<(k * 256) { work[i] = MLDSAField.reduce32(work[i]) }
                    rejected |= MLDSAField.normExceedsMask(work, count: k * 256, bound: MLDSAField.gamma2)

                    // h = MakeHint(−⟨⟨c·t0⟩⟩, r + ⟨⟨c·t0⟩⟩): HighBits(r + c·t0) ≠ HighBits(r) (line 26, Algorithm
                    // 39); reject when h has more than ω ones (line 28).
                    var ones: Int32 = 0
                    for i in 0..<(k * 256) {
                        let shifted = MLDSAField.conditionalSubtractQ(MLDSAField.conditionalAddQ(w[i] &+ work[i]))
                        let hint = MLDSAField.isNonzero(MLDSAField.highBits(shifted) ^ MLDSAField.highBits(w[i]))
                        work[i] = hint
                        ones &+= hint
                    }
                    rejected |= (omega &- ones) &>> 31

                    // The one bit this candidate reveals.
                    if isRejected(rejected) { continue }

                    // Accepted: c̃, z and h are the signature's, and public (line 33).
                    MLDSAConstantTime.declassify(challenge, site: "sign.challenge")
                    MLDSAConstantTime.declassify(
                        UnsafeMutableRawBufferPointer(start: z, count: l * 256 * 4), site: "sign.z")
                    MLDSAConstantTime.declassify(
                        UnsafeMutableRawBufferPointer(start: work, count: k * 256 * 4), site: "sign.hint")
                    MLDSAEncoding.encodeSignature(out, challenge: UnsafeRawBufferPointer(challenge), z: z, hint: work)
                    return
                }
            }
        }
    }

    /// μ = H(tr ‖ 0 ‖ |ctx| ‖ ctx ‖ M, 64) (FIPS 204, Algorithms 2 and 7), one OpenSSL SHAKE256 call.
    static func messageRepresentative(
        tr: [UInt8], context: some DataProtocol, message: some DataProtocol
    ) -> [UInt8] {
        var mu = [UInt8](repeating: 0, count: 64)
        let header: [UInt8] = [0, UInt8(context.count)]
        mu.withUnsafeMutableBytes { out in
            tr.withUnsafeBytes { tr in
                header.withUnsafeBytes { header in
                    withContiguousBytes(context) { contextBase, contextCount in
                        withContiguousBytes(message) { messageBase, messageCount in
                            DigestContext.keccak(
                                .shake256, tr, header, UnsafeRawBufferPointer(start: contextBase, count: contextCount),
                                UnsafeRawBufferPointer(start: messageBase, count: messageCount), into: out)
                        }
                    }
                }
            }
        }
        return mu
    }

    /// The one place a signing candidate's accept/reject decision becomes a branch: `mask` is −1 (reject)
    /// or 0 (accept), the OR of all four checks, each computed without branches over every coefficient;
    /// only this word is declassified.
    @inline(__always)
    static func isRejected(_ mask: Int32) -> Bool {
        MLDSAConstantTime.declassify(mask, site: "sign.rejected") != 0
    }

    /// ML-DSA.Verify_internal (FIPS 204, Algorithm 8) from μ, for a signature of exactly 3309 bytes.
    /// Everything here is public, so it may branch and return early.
    static func verify(signature: UnsafePointer<UInt8>, key: PublicKeyStorage, mu: UnsafeRawBufferPointer) -> Bool {
        let polynomials = l + 1 + k + k  // z, ĉ, w′, h
        let scratch = UnsafeMutablePointer<Int32>.allocate(capacity: polynomials * 256)
        defer { scratch.deallocate() }
        let z = scratch
        let cHat = z + l * 256
        let w = cHat + 256
        let hint = w + k * 256

        // (c̃, z, h) = sigDecode(σ); h = ⊥ or ‖z‖∞ ≥ γ1 − β fails (lines 2–4, 13).
        guard MLDSAEncoding.decodeSignature(signature, z: z, hint: hint) else { return false }
        for i in 0..<(l * 256) where MLDSAField.absolute(z[i]) >= MLDSAField.gamma1 - beta { return false }

        // w′_Approx = NTT⁻¹(Â ∘ NTT(z) − NTT(c) ∘ NTT(t1 · 2^d)) (lines 9–10).
        let challenge = UnsafeRawBufferPointer(start: signature, count: challengeByteCount)
        MLDSASampling.sampleInBall(cHat, challenge: challenge, tau: tau)
        MLDSAField.ntt(cHat)
        MLDSAField.ntt(z, count: l)
        key.matrix.withUnsafeBufferPointer { matrix in
            key.t1Transformed.withUnsafeBufferPointer { t1 in
                for row in 0..<k {
                    let destination = w + row * 256
                    let matrixRow = matrix.baseAddress! + row * l * 256
                    let t1Row = t1.baseAddress! + row * 256
                    for i in 0..<256 {
                        var sum = -Int64(cHat[i]) &* Int64(t1Row[i])
                        for column in 0..<l {
                            sum = sum &+ Int64(matrixRow[column * 256 + i]) &* Int64(z[column * 256 + i])
                        }
                        destination[i] = MLDSAField.montgomeryReduce(sum)
                    }
                }
            }
        }
        MLDSAField.inverseNTT(w, count: k)

        // w1′ = UseHint(h, w′_Approx); c̃′ = H(μ ‖ w1Encode(w1′), λ/4) (lines 11–12).
        var encoded = [UInt8](repeating: 0, count: k * MLDSAEncoding.w1PolyByteCount)
        encoded.withUnsafeMutableBufferPointer { encoded in
            for i in 0..<(k * 128) {
                let low = MLDSAField.useHint(hint[2 * i], MLDSAField.conditionalAddQ(w[2 * i]))
                let high = MLDSAField.useHint(hint[2 * i + 1], MLDSAField.conditionalAddQ(w[2 * i + 1]))
                encoded[i] = UInt8(truncatingIfNeeded: low | high << 4)
            }
        }
        var recomputed = [UInt8](repeating: 0, count: challengeByteCount)
        recomputed.withUnsafeMutableBytes { out in
            encoded.withUnsafeBytes { DigestContext.keccak(.shake256, mu, $0, into: out) }
        }
        return recomputed.withUnsafeBytes { safeCompare($0, challenge) }
    }
}
