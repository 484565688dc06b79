import Foundation
@_spi(ConstantTimeTesting) @_spi(Testing) import SiblingsCrypto

/// Runs the secret-dependent operations with their secrets marked undefined; under
/// `valgrind --tool=memcheck` any branch or memory index that depends on a secret is reported.
/// Tests/SiblingsCryptoTests/ConstantTimeTests.swift runs this program under valgrind and requires
/// zero reports. Outputs are declassified before they are looked at.
///
/// Covered: key generation (ML-KEM-768, ML-DSA-65, X-Wing, the hybrid signature), ML-KEM and X-Wing
/// encapsulation and decapsulation, HPKE seal and open, ML-DSA-65 and hybrid signing; and a
/// declassification audit of ML-DSA signing, which a deliberate (wrong) declassification would pass
/// memcheck by: every candidate may reveal one 4-byte accept/reject word, and only the accepted
/// signature (c̃, z, h) may be made public after it.

func declassify(_ key: SymmetricKey) -> Data {
    key.withUnsafeBytes { ConstantTimeTesting.declassify($0) }
    return key.withUnsafeBytes { Data($0) }
}

func declassify(_ data: Data) -> Data {
    data.withUnsafeBytes { ConstantTimeTesting.declassify($0) }
    return data
}

/// Random bytes marked secret.
func poisoned(_ count: Int) -> Data {
    let data = SecureRandom.bytes(count: count)
    data.withUnsafeBytes { ConstantTimeTesting.poison($0) }
    return data
}

func check(_ condition: Bool, _ what: String) {
    if !condition {
        FileHandle.standardError.write(Data("constant-time check: \(what) gave a wrong answer\n".utf8))
        exit(2)
    }
}

/// What ML-DSA signing declassified, as recorded by the audit: only 4-byte words (the rejection decision
/// of each candidate, and SampleInBall's "all τ placed" per block), then c̃ (48 bytes), z and h.
func checkSigningAudit(_ log: [Int], _ what: String) {
    let accepted = [48, MLDSA65Layout.zBytes, MLDSA65Layout.hintBytes]
    guard log.count > accepted.count, Array(log.suffix(accepted.count)) == accepted,
        log.dropLast(accepted.count).allSatisfy({ $0 == 4 })
    else {
        FileHandle.standardError.write(
            Data("constant-time check: \(what) declassified more than its rejection bits: \(log)\n".utf8))
        exit(3)
    }
}

enum MLDSA65Layout {
    static let zBytes = 5 * 256 * 4
    static let hintBytes = 6 * 256 * 4
}

if CommandLine.arguments.contains("--negative-control") {
    // Proves the harness can fail: a branch on a poisoned byte must be reported by memcheck.
    let secret = UnsafeMutableRawBufferPointer.allocate(byteCount: 16, alignment: 8)
    SecureRandom.fill(secret)
    ConstantTimeTesting.poison(UnsafeRawBufferPointer(secret))
    if secret[0] > 0x80 {
        print("the secret byte is large")
    }
    print("negative control ran")
    exit(0)
}

if CommandLine.arguments.contains("--poison-reaches-output") {
    // Proves the poisoning reaches the computation: branching on an undeclassified decapsulated key
    // must be reported.
    let kem = MLKEM768.PrivateKey()
    let encapsulation = try kem.publicKey.encapsulate()
    kem.poisonSecrets()
    let shared = try kem.decapsulate(encapsulation.encapsulated)
    if shared.withUnsafeBytes({ $0[0] }) > 0x80 {
        print("the shared key's first byte is large")
    }
    exit(0)
}

if CommandLine.arguments.contains("--audit-control") {
    // Proves the audit can fail: declassifying a whole rejected candidate's worth of bytes before the
    // signature, as the old signing loop did with c̃, is refused.
    ConstantTimeTesting.startDeclassificationAudit()
    let dsa = MLDSA65.PrivateKey()
    _ = try dsa.signature(for: Data("audit".utf8))
    var log = ConstantTimeTesting.stopDeclassificationAudit()
    log.insert(48, at: 0)
    checkSigningAudit(log, "the audit control")
    exit(0)
}

do {
    // Key generation from poisoned seeds: only what the public key publishes is declassified inside.
    let kem = try MLKEM768.PrivateKey(seedRepresentation: poisoned(MLKEM768.seedByteCount))
    let dsa = try MLDSA65.PrivateKey(seedRepresentation: poisoned(MLDSA65.seedByteCount))
    let xwing = try XWing.PrivateKey(seedRepresentation: poisoned(XWing.seedByteCount))
    let hybrid = try HybridSignature.PrivateKey(seedRepresentation: poisoned(HybridSignature.seedByteCount))
    _ = declassify(kem.publicKey.rawRepresentation)
    _ = declassify(dsa.publicKey.rawRepresentation)
    _ = declassify(xwing.publicKey.rawRepresentation)
    _ = declassify(hybrid.publicKey.rawRepresentation)

    // ML-KEM-768 encapsulation with poisoned m, and decapsulation of a valid ciphertext and of an invalid
    // one (implicit rejection).
    kem.poisonSecrets()
    let encapsulation = try kem.publicKey.encapsulate(randomness: poisoned(32))
    let ciphertext = declassify(encapsulation.encapsulated)
    var invalid = ciphertext
    invalid[0] ^= 1
    check(declassify(try kem.decapsulate(ciphertext)) == declassify(encapsulation.sharedSecret), "ML-KEM")
    check(declassify(try kem.decapsulate(invalid)) != declassify(encapsulation.sharedSecret), "ML-KEM rejection")

    // X-Wing encapsulation with a poisoned eseed, and decapsulation.
    xwing.poisonSecrets()
    let sealed = try xwing.publicKey.encapsulate(randomness: poisoned(64))
    let xwingCiphertext = declassify(sealed.encapsulated)
    check(declassify(try xwing.decapsulate(xwingCiphertext)) == declassify(sealed.sharedSecret), "X-Wing")

    // HPKE seal (poisoned eseed and message) and open.
    let info = Data("constant time".utf8)
    let message = poisoned(100)
    var sender = try HPKE.Sender(
        recipientKey: xwing.publicKey, ciphersuite: .XWingMLKEM768X25519_SHA256_ChachaPoly, info: info,
        randomness: poisoned(64))
    let box = declassify(try sender.seal(message))
    var recipient = try HPKE.Recipient(
        privateKey: xwing, ciphersuite: .XWingMLKEM768X25519_SHA256_ChachaPoly, info: info,
        encapsulatedKey: declassify(sender.encapsulatedKey))
    check(declassify(try recipient.open(box)) == declassify(message), "HPKE")
    let exported = declassify(try sender.exportSecret(context: info, outputByteCount: 32))
    check(declassify(try recipient.exportSecret(context: info, outputByteCount: 32)) == exported, "HPKE export")

    // ML-DSA-65 signing, hedged and deterministic, with the declassification audit.
    dsa.poisonSecrets()
    let text = Data("constant time".utf8)
    for _ in 0..<3 {
        ConstantTimeTesting.startDeclassificationAudit()
        let signature = try dsa.signature(for: text, context: Data("ctx".utf8))
        checkSigningAudit(ConstantTimeTesting.stopDeclassificationAudit(), "ML-DSA-65 signing")
        signature.withUnsafeBytes { ConstantTimeTesting.declassify($0) }
        check(dsa.publicKey.isValidSignature(signature, for: text, context: Data("ctx".utf8)), "ML-DSA")
    }
    ConstantTimeTesting.startDeclassificationAudit()
    let deterministic = try dsa.deterministicSignature(for: text, context: Data())
    checkSigningAudit(ConstantTimeTesting.stopDeclassificationAudit(), "deterministic ML-DSA-65 signing")
    deterministic.withUnsafeBytes { ConstantTimeTesting.declassify($0) }
    check(dsa.publicKey.isValidSignature(deterministic, for: text), "ML-DSA deterministic")

    // The hybrid signature (Ed25519 in OpenSSL, ML-DSA-65 here).
    hybrid.poisonSecrets()
    let hybridSignature = try hybrid.signature(for: text, context: Data("ctx".utf8))
    _ = declassify(hybridSignature.rawRepresentation)
    check(hybrid.publicKey.isValidSignature(hybridSignature, for: text, context: Data("ctx".utf8)), "hybrid")

    print(
        "constant-time check: key generation, ML-KEM-768 and X-Wing encapsulation and decapsulation, HPKE, "
            + "ML-DSA-65 and hybrid signing ran with poisoned secrets; signing declassified only its rejection bits"
    )
} catch {
    FileHandle.standardError.write(Data("constant-time check: \(error)\n".utf8))
    exit(1)
}
