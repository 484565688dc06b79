import Foundation
@_spi(Testing) import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("MLDSA65")
struct MLDSA65Tests {
    typealias PrivateKey = MLDSA65.PrivateKey
    typealias PublicKey = MLDSA65.PublicKey

    /// FIPS 204, Table 1 and section 7.2, for ML-DSA-65: where the hint starts and how long it is.
    static let omega = 55
    static let k = 6
    static let hintOffset = 48 + 5 * 640

    @Test("NIST deterministic pure-mode KAT: key generation, signing and verification (100 records)")
    func knownAnswers() throws {
        let records = try Vectors.records("ml-dsa/kat_MLDSA_65_det_pure.rsp")
        #expect(records.count == 100)
        var checked = 0
        for record in records {
            let key = try PrivateKey(seedRepresentation: try record.bytes("xi"))
            #expect(key.publicKey.rawRepresentation == (try record.bytes("pk")), "\(record)")
            #expect(key.expandedRepresentation == (try record.bytes("sk")), "\(record)")
            let message = try record.bytes("msg")
            let context = try record.bytes("ctx")
            let expected = try record.bytes("sm").prefix(MLDSA65.signatureByteCount)
            let signature = try key.deterministicSignature(for: message, context: context)
            #expect(signature == expected, "\(record)")
            let publicKey = try PublicKey(rawRepresentation: try record.bytes("pk"))
            #expect(publicKey.isValidSignature(signature, for: message, context: context), "\(record)")
            checked += 1
        }
        #expect(checked == 100)
    }

    /// README-cctv-accumulated.md: seeds from one SHAKE128 stream, public keys and deterministic signatures of
    /// the empty message written to another; 10 000 iterations in an optimized build, 100 in a debug one.
    @Test("C2SP CCTV accumulated key generation and signing")
    func accumulated() throws {
        #if DEBUG
            let (iterations, expected) = (100, "8358a1843220194417cadbc2651295cd8fc65125b5a5c1a239a16dc8b57ca199")
        #else
            let (iterations, expected) = (10_000, "5ff5e196f0b830c3b10a9eb5358e7c98a3a20136cb677f3ae3b90175c3ace329")
        #endif
        var seeds = SHAKE128()
        var accumulator = SHAKE128()
        for _ in 0..<iterations {
            let key = try PrivateKey(seedRepresentation: seeds.squeeze(count: 32))
            let publicKey = key.publicKey.rawRepresentation
            accumulator.absorb(publicKey)
            let signature = try key.deterministicSignature(for: Data(), context: Data())
            accumulator.absorb(signature)
            guard key.publicKey.isValidSignature(signature, for: Data()) else {
                Issue.record("an accumulated signature did not verify")
                return
            }
        }
        #expect(accumulator.squeeze(count: 32) == Data(hex: expected))
    }

    @Test("keys, signatures and verdicts agree with pyca/cryptography (OpenSSL 4.0) both ways")
    func crossCheck() throws {
        let oracle = try ReferenceOracle()
        for _ in 0..<crossCheckRounds {
            let seed = randomBytes(32)
            let key = try PrivateKey(seedRepresentation: seed)
            let publicKey = key.publicKey.rawRepresentation
            #expect(publicKey == (try oracle.bytes("mldsa65_public", ["seed": seed])))

            // Swift signs; pyca verifies, and refuses a flipped bit and a wrong context.
            let message = randomBytes(randomLength(0...300))
            let context = randomBytes(randomLength(0...255))
            let signature = try key.signature(for: message, context: context)
            func pycaVerifies(_ signature: Data, _ message: Data, _ context: Data) throws -> Bool {
                try oracle.bool(
                    "mldsa65_verify",
                    ["public": publicKey, "message": message, "context": context, "signature": signature])
            }
            #expect(try pycaVerifies(signature, message, context))
            #expect(!(try pycaVerifies(flipRandomBit(signature), message, context)))
            let wrongContext = alter(context)
            #expect(!(try pycaVerifies(signature, message, wrongContext)))

            // pyca signs; Swift verifies, and refuses the same alterations.
            let theirs = try oracle.bytes("mldsa65_sign", ["seed": seed, "message": message, "context": context])
            #expect(key.publicKey.isValidSignature(theirs, for: message, context: context))
            #expect(!key.publicKey.isValidSignature(flipRandomBit(theirs), for: message, context: context))
            #expect(!key.publicKey.isValidSignature(theirs, for: message, context: wrongContext))
            #expect(!key.publicKey.isValidSignature(theirs, for: message + Data([0]), context: context))
        }
    }

    @Test("signing with an explicit rnd matches dilithium-py's ML-DSA.Sign_internal")
    func derandomizedCrossCheck() throws {
        let oracle = try ReferenceOracle()
        for _ in 0..<25 {
            let seed = randomBytes(32)
            let message = randomBytes(randomLength(0...300))
            let context = randomBytes(randomLength(0...255))
            let rnd = randomBytes(32)
            let reference = try oracle.call(
                "mldsa65_sign_internal", ["seed": seed, "message": message, "context": context, "rnd": rnd])
            let key = try PrivateKey(seedRepresentation: seed)
            #expect(key.publicKey.rawRepresentation == Data(hex: try #require(reference["public"] as? String)))
            #expect(key.expandedRepresentation == Data(hex: try #require(reference["private"] as? String)))
            let signature = try key.signature(for: message, context: context, randomness: rnd)
            #expect(signature == Data(hex: try #require(reference["out"] as? String)))
            #expect(key.publicKey.isValidSignature(signature, for: message, context: context))
        }
    }

    @Test("key representations, the empty context, hedging and a deterministic random source")
    func representations() throws {
        let key = PrivateKey()
        #expect(key.seedRepresentation.count == MLDSA65.seedByteCount)
        #expect(key.expandedRepresentation.count == MLDSA65.privateKeyByteCount)
        #expect(key.publicKey.rawRepresentation.count == MLDSA65.publicKeyByteCount)
        let again = try PrivateKey(seedRepresentation: key.seedRepresentation)
        #expect(again.publicKey == key.publicKey)
        #expect(again.expandedRepresentation == key.expandedRepresentation)
        #expect(try PublicKey(rawRepresentation: key.publicKey.rawRepresentation) == key.publicKey)
        #expect(PrivateKey().publicKey != key.publicKey)

        let fromSource = PrivateKey(source: FixedSource(byte: 0x42))
        #expect(fromSource.seedRepresentation == Data(repeating: 0x42, count: 32))
        #expect(
            fromSource.publicKey == (try PrivateKey(seedRepresentation: Data(repeating: 0x42, count: 32))).publicKey)

        let message = Data("message".utf8)
        let signature = try key.signature(for: message)
        #expect(signature.count == MLDSA65.signatureByteCount)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(key.publicKey.isValidSignature(signature, for: message, context: Data()))
        #expect(!key.publicKey.isValidSignature(signature, for: message, context: Data([0])))
        #expect(!again.publicKey.isValidSignature(signature, for: Data("massage".utf8)))
        // Hedged signatures differ; deterministic ones repeat and equal signing with rnd = 0^32.
        #expect(try key.signature(for: message) != signature)
        let deterministic = try key.deterministicSignature(for: message, context: Data())
        #expect(try key.deterministicSignature(for: message, context: Data()) == deterministic)
        #expect(try key.signature(for: message, context: Data(), randomness: Data(count: 32)) == deterministic)
        // Any DataProtocol is accepted, including non-contiguous and array inputs.
        let pieces = DispatchData.from(message.prefix(3), message.dropFirst(3))
        #expect(try key.deterministicSignature(for: pieces, context: [UInt8]()) == deterministic)
        #expect(key.publicKey.isValidSignature(Array(deterministic), for: pieces, context: [UInt8]()))
    }

    @Test("one key signs and verifies from many tasks at once")
    func concurrency() async throws {
        let key = PrivateKey()
        let publicKey = key.publicKey
        let messages = (0..<16).map { Data("message \($0)".utf8) }
        let expected = try messages.map { try key.deterministicSignature(for: $0, context: Data()) }
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<64 {
                group.addTask {
                    let message = messages[index % messages.count]
                    let deterministic = try key.deterministicSignature(for: message, context: Data())
                    let hedged = try key.signature(for: message)
                    return deterministic == expected[index % messages.count]
                        && publicKey.isValidSignature(hedged, for: message)
                        && !publicKey.isValidSignature(hedged, for: message + Data([1]))
                }
            }
            for try await ok in group { #expect(ok) }
        }
    }

    @Test("wrong lengths and oversized contexts are refused with typed errors")
    func wrongSizes() throws {
        for length in [0, 31, 33, 64] {
            expectCryptoError(.incorrectKeySize) { try PrivateKey(seedRepresentation: Data(count: length)) }
        }
        for length in [0, 32, 1951, 1953, 4032] {
            expectCryptoError(.incorrectKeySize) { try PublicKey(rawRepresentation: Data(count: length)) }
        }
        let key = PrivateKey()
        let message = Data("m".utf8)
        let longContext = Data(count: 256)
        expectCryptoError(.invalidParameter) { try key.signature(for: message, context: longContext) }
        expectCryptoError(.invalidParameter) { try key.deterministicSignature(for: message, context: longContext) }
        expectCryptoError(.invalidParameter) {
            try key.signature(for: message, context: longContext, randomness: Data(count: 32))
        }
        for length in [0, 31, 33] {
            expectCryptoError(.incorrectParameterSize) {
                try key.signature(for: message, context: Data(), randomness: Data(count: length))
            }
        }
        // 255 bytes is the longest context allowed.
        let maximal = Data(repeating: 7, count: 255)
        let signature = try key.signature(for: message, context: maximal)
        #expect(key.publicKey.isValidSignature(signature, for: message, context: maximal))
        #expect(!key.publicKey.isValidSignature(signature, for: message, context: maximal + Data([7])))
        for length in [0, 1, 3308, 3310, 6618] {
            #expect(!key.publicKey.isValidSignature(Data(count: length), for: message))
        }
        #expect(!key.publicKey.isValidSignature(signature.prefix(3308), for: message, context: maximal))
        #expect(!key.publicKey.isValidSignature(signature + Data([0]), for: message, context: maximal))
    }

    /// FIPS 204, Algorithm 21 (HintBitUnpack) and Algorithm 8 line 13: each malformed encoding of an otherwise
    /// valid signature is refused by Swift and, as a check on the test, by pyca.
    @Test("malformed hints and out-of-range z are refused, as pyca refuses them")
    func malformedSignatures() throws {
        let oracle = try ReferenceOracle()
        let key = PrivateKey()
        let publicKey = key.publicKey
        // A signature with at least one spare hint slot and a polynomial with two or more hints.
        var message = Data()
        var signature = Data()
        var counts: [Int] = []
        repeat {
            message = randomBytes(32)
            signature = try key.deterministicSignature(for: message, context: Data())
            counts = (0..<Self.k).map { Int(signature[Self.hintOffset + Self.omega + $0]) }
        } while counts.last! >= Self.omega || !hasRepeatedPolynomial(counts)
        #expect(publicKey.isValidSignature(signature, for: message))

        func refused(_ altered: Data, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            #expect(!publicKey.isValidSignature(altered, for: message), "\(what)", sourceLocation: sourceLocation)
            let pyca = try oracle.bool(
                "mldsa65_verify",
                [
                    "public": publicKey.rawRepresentation, "message": message, "context": Data(),
                    "signature": altered,
                ])
            #expect(!pyca, "pyca accepted: \(what)", sourceLocation: sourceLocation)
        }

        let countsOffset = Self.hintOffset + Self.omega
        var altered = signature
        // A running hint count over ω (in the last polynomial, then in the first).
        altered[countsOffset + Self.k - 1] = UInt8(Self.omega + 1)
        try refused(altered, "last hint count ω + 1")
        altered = signature
        altered[countsOffset] = 0xff
        try refused(altered, "first hint count 255")
        // A running count that decreases.
        if let index = (1..<Self.k).first(where: { counts[$0] > 0 }) {
            altered = signature
            altered[countsOffset + index - 1] = UInt8(counts[index] + 1)
            try refused(altered, "decreasing hint counts")
        }
        // Indices within one polynomial not strictly increasing: swapped, then repeated.
        let polynomial = (0..<Self.k).first { counts[$0] - ($0 == 0 ? 0 : counts[$0 - 1]) >= 2 }!
        let first = Self.hintOffset + (polynomial == 0 ? 0 : counts[polynomial - 1])
        altered = signature
        altered.swapAt(first, first + 1)
        try refused(altered, "hint indices swapped")
        altered = signature
        altered[first + 1] = altered[first]
        try refused(altered, "hint index repeated")
        // Nonzero padding after the last hint index.
        altered = signature
        altered[Self.hintOffset + counts.last!] = 1
        try refused(altered, "nonzero hint padding")
        altered = signature
        altered[Self.hintOffset + Self.omega - 1] = 0x80
        try refused(altered, "nonzero last padding byte")
        // ‖z‖∞ = γ1 − β (the first coefficient of z, stored as γ1 − z in 20 bits), at both signs.
        let gamma1 = 1 << 19
        let beta = 196
        for stored in [beta, 2 * gamma1 - beta, 0] {
            altered = signature
            altered[48] = UInt8(stored & 0xff)
            altered[49] = UInt8((stored >> 8) & 0xff)
            altered[50] = (altered[50] & 0xf0) | UInt8(stored >> 16)
            try refused(altered, "z coefficient stored as \(stored)")
        }
        try refused(Data(count: MLDSA65.signatureByteCount), "all zeros")
        try refused(Data(repeating: 0xff, count: MLDSA65.signatureByteCount), "all 0xff")
    }

    @Test("random garbage of the right length never verifies and never crashes")
    func garbage() throws {
        let key = PrivateKey()
        let message = Data("m".utf8)
        for _ in 0..<crossCheckRounds {
            #expect(!key.publicKey.isValidSignature(randomBytes(MLDSA65.signatureByteCount), for: message))
            // Garbage with a well-formed hint section (no hints), so z and c̃ are what is tested.
            var body = randomBytes(MLDSA65.signatureByteCount)
            body.replaceSubrange(Self.hintOffset..<body.count, with: Data(count: Self.omega + Self.k))
            #expect(!key.publicKey.isValidSignature(body, for: message))
            // A random public key decodes (every 1952-byte string does) and refuses a valid signature.
            let stranger = try PublicKey(rawRepresentation: randomBytes(MLDSA65.publicKeyByteCount))
            #expect(!stranger.isValidSignature(try key.signature(for: message), for: message))
        }
    }

    private func hasRepeatedPolynomial(_ counts: [Int]) -> Bool {
        (0..<counts.count).contains { counts[$0] - ($0 == 0 ? 0 : counts[$0 - 1]) >= 2 }
    }

    /// Another context of at most 255 bytes: one more byte when `context` is empty, else the first byte changed.
    private func alter(_ context: Data) -> Data {
        guard !context.isEmpty else { return Data([0]) }
        var altered = context
        altered[altered.startIndex] ^= 0x01
        return altered
    }

    private func flipRandomBit(_ data: Data) -> Data {
        var altered = data
        let bit = Int.random(in: 0..<(data.count * 8))
        altered[bit / 8] ^= UInt8(1 << (bit % 8))
        return altered
    }
}

/// A "random" source that returns one byte over and over, for reproducible keys.
private struct FixedSource: SecureRandomSource {
    let byte: UInt8

    func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        for index in buffer.indices { buffer[index] = byte }
    }
}

extension DispatchData {
    /// Non-contiguous bytes made of `pieces`, to exercise multi-region DataProtocol inputs.
    fileprivate static func from(_ pieces: Data...) -> DispatchData {
        var result = DispatchData.empty
        for piece in pieces {
            piece.withUnsafeBytes { result.append($0) }
        }
        return result
    }
}
