import Foundation

/// Key encapsulation, shaped like CryptoKit's `KEM`.
public enum KEM {
    /// The result of an encapsulation: the shared secret to use, and the bytes to send to the holder of the
    /// private key (CryptoKit's `KEM.EncapsulationResult`).
    public struct EncapsulationResult: Sendable {
        public let sharedSecret: SymmetricKey
        public let encapsulated: Data

        public init(sharedSecret: SymmetricKey, encapsulated: Data) {
            self.sharedSecret = sharedSecret
            self.encapsulated = encapsulated
        }
    }
}

extension SecureBytes {
    /// self ‖ SHA3-256(publicKey): CryptoKit's `integrityCheckedRepresentation` of a seed-form private key.
    func integrityChecked(publicKey: Data) -> Data {
        withUnsafeBytes { seed in
            var out = Data(seed)
            out.append(SHA3_256.hash(data: publicKey).rawRepresentation)
            return out
        }
    }
}

/// Splits CryptoKit's `integrityCheckedRepresentation` (seed ‖ SHA3-256(public key)) of `what`, builds the key
/// from the seed with `make`, and checks the hash against the key's public key.
func fromIntegrityChecked<Key>(
    _ representation: some DataProtocol, seedByteCount: Int, what: String, make: (UnsafeRawBufferPointer) throws -> Key,
    publicKey: (Key) -> Data
) throws -> Key {
    guard representation.count == seedByteCount + 32 else {
        throw CryptoError.incorrectKeySize(
            "an integrity-checked \(what) (seed ‖ SHA3-256 of the public key)", expected: seedByteCount + 32,
            got: representation.count)
    }
    // Copied into wiped memory: the seed is secret.
    let bytes = SecureBytes(representation)
    let key = try bytes.withUnsafeBytes { try make(UnsafeRawBufferPointer(rebasing: $0[0..<seedByteCount])) }
    let matches = bytes.withUnsafeBytes {
        safeCompare(SHA3_256.hash(data: publicKey(key)).rawRepresentation, Data($0[seedByteCount...]))
    }
    guard matches else {
        throw CryptoError.publicKeyMismatch(what)
    }
    return key
}
