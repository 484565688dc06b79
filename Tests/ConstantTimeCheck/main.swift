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

/// What ML-DSA signing may declassify, checked against the audit's log: for each candidate, one or more
/// "all τ placed" words from the constant-time SampleInBall, then exactly one 4-byte accept/reject word;
/// after the accepted candidate, its c̃ (48 bytes), z and h, and nothing else.
func signingAuditIsClean(_ log: [ConstantTimeTesting.Declassification]) -> Bool {
    let accepted = [
        ConstantTimeTesting.Declassification(site: "sign.challenge", byteCount: 48),
        ConstantTimeTesting.Declassification(site: "sign.z", byteCount: MLDSA65Layout.zBytes),
        ConstantTimeTesting.Declassification(site: "sign.hint", byteCount: MLDSA65Layout.hintBytes),
    ]
    guard log.count > accepted.count, Array(log.suffix(accepted.count)) == accepted else { return false }
    var placed = false
    var candidates = 0
    for entry in log.dropLast(accepted.count) {
        switch (entry.site, entry.byteCount) {
        case ("sampleInBall.done", 4): placed = true
        case ("sign.rejected", 4):
            guard placed else { return false }
            placed = false
            candidates += 1
        default: return false
        }
    }
    return !placed && candidates >= 1
}

/// The log with runs of one entry counted: "sign.rejected:4 ×3".
func summary(_ log: [ConstantTimeTesting.Declassification]) -> String {
    var runs: [(ConstantTimeTesting.Declassification, Int)] = []
    for entry in log {
        if let last = runs.last, last.0 == entry { runs[runs.count - 1].1 += 1 } else { runs.append((entry, 1)) }
    }
    return runs.map { $0.1 == 1 ? "\($0.0)" : "\($0.0) ×\($0.1)" }.joined(separator: ", ")
}

func checkSigningAudit(_ log: [ConstantTimeTesting.Declassification], _ what: String) {
    guard signingAuditIsClean(log) else {
        FileHandle.standardError.write(
            Data("constant-time check: \(what) declassified more than its rejection bits: \(summary(log))\n".utf8))
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
    // Proves the audit can fail: the log the signing loop before issue 13 produced (c̃ declassified for
    // every candidate, before a variable-time SampleInBall; four separate reject decisions, so the
    // accepted candidate declassified four words) is refused, while today's log passes.
    let key = MLDSA65.PrivateKey()
    ConstantTimeTesting.startDeclassificationAudit()
    _ = try key.signature(for: Data("audit".utf8))
    let log = ConstantTimeTesting.stopDeclassificationAudit()
    guard signingAuditIsClean(log) else {
        FileHandle.standardError.write(
            Data("constant-time check: today's signing log is refused: \(summary(log))\n".utf8))
        exit(1)
    }
    let decisions = log.filter { $0.site == "sign.rejected" }.count
    var old: [ConstantTimeTesting.Declassification] = []
    for candidate in 0..<decisions {
        old.append(.init(site: "sign.challenge", byteCount: 48))
        let checks = candidate == decisions - 1 ? 4 : 1
        old += Array(repeating: .init(site: "sign.rejected", byteCount: 4), count: checks)
    }
    old += log.suffix(2)
    checkSigningAudit(old, "the signing loop before issue 13")
    exit(0)
}

/// Whether this process's writable memory holds the 16 bytes `masked` XOR `mask` anywhere: the needle is
/// kept masked, so it is never in memory in the clear but where the code under test left it.
func memoryHolds(masked: [UInt8], mask: UInt8) -> Bool {
    guard let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8) else {
        FileHandle.standardError.write(Data("wipe check: cannot read /proc/self/maps\n".utf8))
        exit(1)
    }
    let descriptor = open("/proc/self/mem", O_RDONLY)
    guard descriptor >= 0 else {
        FileHandle.standardError.write(Data("wipe check: cannot open /proc/self/mem\n".utf8))
        exit(1)
    }
    defer { close(descriptor) }
    let chunk = 1 << 20
    let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: chunk + 16)
    defer { buffer.deallocate() }
    for line in maps.split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 2, fields[1].hasPrefix("rw") else { continue }
        let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
        guard bounds.count == 2 else { continue }
        var address = bounds[0]
        while address < bounds[1] {
            let length = Int(min(UInt64(chunk + 16), bounds[1] - address))
            let read = pread(descriptor, buffer, length, off_t(Int64(bitPattern: address)))
            if read >= 16 {
                for offset in 0...(read - 16) where buffer[offset] ^ mask == masked[0] {
                    var equal = true
                    for index in 1..<16 where buffer[offset + index] ^ mask != masked[index] {
                        equal = false
                        break
                    }
                    if equal { return true }
                }
            }
            address += UInt64(chunk)
        }
    }
    return false
}

/// The wipe check's control: a copy of a secret in an unwiped `Data`.
nonisolated(unsafe) var leftBehind: Data?

/// Bytes 16..<32 of `key`, masked: the part of a freed 32- or 64-byte heap block that malloc does not
/// overwrite with its own pointers, so a secret left in a freed `Data` is still there to find.
func maskedTail(_ key: SymmetricKey, mask: UInt8) -> [UInt8] {
    key.withUnsafeBytes { bytes in (16..<32).map { bytes[$0] ^ mask } }
}

if CommandLine.arguments.contains("--wipe-check") {
    // Transient secrets must not outlive the operation: after each one, with its results released,
    // the shared secret must be nowhere in the process's memory (issue 13). Before the fix, ML-KEM's
    // G(m ‖ H(ek)) came back as a Data, X-Wing's combined secret went through one, and HPKE copied the
    // shared secret into a Data salt; each is found by this scan.
    let mask: UInt8 = 0xa5
    var leaks: [String] = []
    let kem = MLKEM768.PrivateKey()
    let kemNeedle = try {
        let result = try kem.publicKey.encapsulate(randomness: SecureRandom.bytes(count: 32))
        _ = try kem.decapsulate(result.encapsulated)
        return maskedTail(result.sharedSecret, mask: mask)
    }()
    if memoryHolds(masked: kemNeedle, mask: mask) { leaks.append("ML-KEM-768's K (the first half of G)") }

    let xwing = XWing.PrivateKey()
    let xwingNeedle = try {
        let result = try xwing.publicKey.encapsulate()
        _ = try xwing.decapsulate(result.encapsulated)
        return maskedTail(result.sharedSecret, mask: mask)
    }()
    if memoryHolds(masked: xwingNeedle, mask: mask) { leaks.append("X-Wing's shared secret") }

    let eseed = SecureRandom.bytes(count: 64)
    let hpkeNeedle = try {
        let secret = try xwing.publicKey.encapsulate(randomness: eseed).sharedSecret
        var sender = try HPKE.Sender(
            recipientKey: xwing.publicKey, ciphersuite: .XWingMLKEM768X25519_SHA256_ChachaPoly, info: Data(),
            randomness: eseed)
        let box = try sender.seal(Data("wipe".utf8))
        var recipient = try HPKE.Recipient(
            privateKey: xwing, ciphersuite: .XWingMLKEM768X25519_SHA256_ChachaPoly, info: Data(),
            encapsulatedKey: sender.encapsulatedKey)
        _ = try recipient.open(box)
        return maskedTail(secret, mask: mask)
    }()
    if memoryHolds(masked: hpkeNeedle, mask: mask) { leaks.append("HPKE's shared secret (the key schedule's salt)") }

    // The control: a secret deliberately left in a freed Data is found.
    let controlNeedle: [UInt8] = {
        let key = SymmetricKey(size: .bits256)
        // A Data of its own, kept where the optimizer cannot drop it, then freed (not wiped).
        leftBehind = key.withUnsafeBytes { Data($0) }
        leftBehind = nil
        return maskedTail(key, mask: mask)
    }()
    let controlFound = memoryHolds(masked: controlNeedle, mask: mask)

    print(
        "wipe check: \(leaks.isEmpty ? "no transient secret left in memory" : "left in memory: \(leaks)"); control \(controlFound ? "found" : "not found")"
    )
    exit(leaks.isEmpty && controlFound ? 0 : 4)
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
