import Foundation

/// Compares two byte strings in time that depends only on their lengths (`CRYPTO_memcmp`).
///
/// Use it for every comparison of a MAC, tag, hash or key with a value an attacker may choose.
public func safeCompare(_ lhs: some DataProtocol, _ rhs: some DataProtocol) -> Bool {
    let left = Data(lhs)
    let right = Data(rhs)
    return left.withUnsafeBytes { l in right.withUnsafeBytes { r in safeCompare(l, r) } }
}

func safeCompare(_ lhs: UnsafeRawBufferPointer, _ rhs: UnsafeRawBufferPointer) -> Bool {
    guard lhs.count == rhs.count else { return false }
    return OpenSSLMemory.constantTimeEqual(lhs, rhs)
}
