import Foundation

/// HKDF (RFC 5869) over a ``HashFunction``, on OpenSSL's `EVP_KDF` "HKDF".
public enum HKDF<H: HashFunction> {
    /// The longest output HKDF defines: 255 blocks of the hash (RFC 5869, section 2.3).
    public static var maximumOutputByteCount: Int { 255 * H.byteCount }

    /// Extract-then-expand (RFC 5869, section 2). An empty `salt` means HashLen zero bytes.
    public static func deriveKey(
        inputKeyMaterial: SymmetricKey, salt: some DataProtocol, info: some DataProtocol, outputByteCount: Int
    ) throws -> SymmetricKey {
        try checkOutput(outputByteCount)
        return SymmetricKey(
            secureBytes: try OpenSSLKDF.derive(
                OpenSSLAlgorithms.hkdf, "HKDF",
                parameters: [
                    .utf8("digest", H.algorithm.openSSLName), .utf8("mode", "EXTRACT_AND_EXPAND"),
                    .secretOctets("key", inputKeyMaterial.bytes), .octets("salt", Data(salt)),
                    .octets("info", Data(info)),
                ],
                outputByteCount: outputByteCount))
    }

    /// Extract-then-expand with an empty salt.
    public static func deriveKey(
        inputKeyMaterial: SymmetricKey, info: some DataProtocol, outputByteCount: Int
    ) throws -> SymmetricKey {
        try deriveKey(inputKeyMaterial: inputKeyMaterial, salt: Data(), info: info, outputByteCount: outputByteCount)
    }

    /// HKDF-Extract (RFC 5869, section 2.2): the pseudorandom key, HashLen bytes.
    public static func extract(inputKeyMaterial: SymmetricKey, salt: some DataProtocol) throws -> SymmetricKey {
        SymmetricKey(
            secureBytes: try OpenSSLKDF.derive(
                OpenSSLAlgorithms.hkdf, "HKDF-Extract",
                parameters: [
                    .utf8("digest", H.algorithm.openSSLName), .utf8("mode", "EXTRACT_ONLY"),
                    .secretOctets("key", inputKeyMaterial.bytes), .octets("salt", Data(salt)),
                ],
                outputByteCount: H.byteCount))
    }

    /// HKDF-Extract with a secret salt (HPKE's key schedule salts with the KEM's shared secret, RFC 9180
    /// section 5.1), computed as what it is, HMAC-Hash(salt, IKM) (RFC 5869, section 2.2): OpenSSL's HKDF
    /// frees its copy of a salt without wiping it, while its HMAC keeps the key in wiped memory. The
    /// PRK is written straight into wiped memory.
    static func extract(inputKeyMaterial: some DataProtocol, secretSalt: SymmetricKey) -> SymmetricKey {
        let context = HMACContext(algorithm: H.algorithm, key: secretSalt)
        let ikm = inputKeyMaterial.asData
        ikm.withUnsafeBytes { context.update($0) }
        return SymmetricKey(secureBytes: SecureBytes(count: H.byteCount) { context.finalize(into: $0) })
    }

    /// HKDF-Expand (RFC 5869, section 2.3). `pseudoRandomKey` must be at least HashLen bytes.
    public static func expand(
        pseudoRandomKey: SymmetricKey, info: some DataProtocol, outputByteCount: Int
    ) throws
        -> SymmetricKey
    {
        try checkOutput(outputByteCount)
        guard pseudoRandomKey.bitCount / 8 >= H.byteCount else {
            throw CryptoError(
                .incorrectKeySize,
                "an HKDF pseudorandom key must be at least \(H.byteCount) bytes (HashLen), got \(pseudoRandomKey.bitCount / 8)"
            )
        }
        return SymmetricKey(
            secureBytes: try OpenSSLKDF.derive(
                OpenSSLAlgorithms.hkdf, "HKDF-Expand",
                parameters: [
                    .utf8("digest", H.algorithm.openSSLName), .utf8("mode", "EXPAND_ONLY"),
                    .secretOctets("key", pseudoRandomKey.bytes), .octets("info", Data(info)),
                ],
                outputByteCount: outputByteCount))
    }

    private static func checkOutput(_ outputByteCount: Int) throws {
        guard outputByteCount > 0, outputByteCount <= maximumOutputByteCount else {
            throw CryptoError(
                .invalidParameter,
                "HKDF output must be 1 to \(maximumOutputByteCount) bytes (255 × HashLen), asked for \(outputByteCount)"
            )
        }
    }
}
