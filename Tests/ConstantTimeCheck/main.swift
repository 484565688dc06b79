import Foundation
@_spi(ConstantTimeTesting) import SiblingsCrypto

/// Runs the secret-dependent operations with their secrets marked undefined; under
/// `valgrind --tool=memcheck` any branch or memory index that depends on a secret is reported.
/// Tests/SiblingsCryptoTests/ConstantTimeTests.swift runs this program under valgrind and requires
/// zero reports. Outputs are declassified before they are looked at.

func declassify(_ key: SymmetricKey) -> Data {
    key.withUnsafeBytes { ConstantTimeTesting.declassify($0) }
    return key.withUnsafeBytes { Data($0) }
}

func check(_ condition: Bool, _ what: String) {
    if !condition {
        FileHandle.standardError.write(Data("constant-time check: \(what) gave a wrong answer\n".utf8))
        exit(2)
    }
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
    let encapsulation = kem.publicKey.encapsulate()
    kem.poisonSecrets()
    let shared = try kem.decapsulate(encapsulation.encapsulated)
    if shared.withUnsafeBytes({ $0[0] }) > 0x80 {
        print("the shared key's first byte is large")
    }
    exit(0)
}

do {
    // ML-KEM-768 decapsulation, of a valid ciphertext and of an invalid one (implicit rejection).
    let kem = MLKEM768.PrivateKey()
    let encapsulation = kem.publicKey.encapsulate()
    var invalid = encapsulation.encapsulated
    invalid[0] ^= 1
    kem.poisonSecrets()
    check(
        declassify(try kem.decapsulate(encapsulation.encapsulated)) == declassify(encapsulation.sharedSecret), "ML-KEM")
    check(declassify(try kem.decapsulate(invalid)) != declassify(encapsulation.sharedSecret), "ML-KEM rejection")

    // X-Wing decapsulation.
    let xwing = XWing.PrivateKey()
    let sealed = try xwing.publicKey.encapsulate()
    xwing.poisonSecrets()
    check(declassify(try xwing.decapsulate(sealed.encapsulated)) == declassify(sealed.sharedSecret), "X-Wing")

    // ML-DSA-65 signing, hedged and deterministic: only the rejection decisions, c̃ and the accepted
    // signature are declassified inside; everything else must not steer execution.
    let dsa = MLDSA65.PrivateKey()
    let message = Data("constant time".utf8)
    dsa.poisonSecrets()
    for _ in 0..<3 {
        let signature = try dsa.signature(for: message, context: Data("ctx".utf8))
        signature.withUnsafeBytes { ConstantTimeTesting.declassify($0) }
        check(dsa.publicKey.isValidSignature(signature, for: message, context: Data("ctx".utf8)), "ML-DSA")
    }
    let deterministic = try dsa.deterministicSignature(for: message, context: Data())
    deterministic.withUnsafeBytes { ConstantTimeTesting.declassify($0) }
    check(dsa.publicKey.isValidSignature(deterministic, for: message), "ML-DSA deterministic")

    print(
        "constant-time check: ML-KEM-768 decapsulation, X-Wing decapsulation and ML-DSA-65 signing ran with poisoned secrets"
    )
} catch {
    FileHandle.standardError.write(Data("constant-time check: \(error)\n".utf8))
    exit(1)
}
