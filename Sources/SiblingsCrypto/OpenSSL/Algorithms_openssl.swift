internal import COpenSSL

/// An algorithm object fetched from OpenSSL's default provider once per process.
///
/// OpenSSL 3.0 fetches implicitly on every `EVP_*Init` given a legacy `EVP_sha256()`-style handle, which
/// costs more than encrypting a short message; holding the fetched object avoids that. Fetched
/// objects are reference-counted, immutable and documented thread-safe, so sharing them is safe.
final class FetchedAlgorithm: @unchecked Sendable {
    let pointer: OpaquePointer

    private init(_ pointer: OpaquePointer) { self.pointer = pointer }

    static func digest(_ name: String) -> FetchedAlgorithm {
        guard let md = EVP_MD_fetch(nil, name, nil) else {
            fatalError("OpenSSL's default provider has no \(name): \(OpenSSLError.drainQueue())")
        }
        return FetchedAlgorithm(md)
    }

    static func cipher(_ name: String) -> FetchedAlgorithm {
        guard let cipher = EVP_CIPHER_fetch(nil, name, nil) else {
            fatalError("OpenSSL's default provider has no \(name): \(OpenSSLError.drainQueue())")
        }
        return FetchedAlgorithm(cipher)
    }

    static func mac(_ name: String) -> FetchedAlgorithm {
        guard let mac = EVP_MAC_fetch(nil, name, nil) else {
            fatalError("OpenSSL's default provider has no \(name): \(OpenSSLError.drainQueue())")
        }
        return FetchedAlgorithm(mac)
    }

    static func kdf(_ name: String) -> FetchedAlgorithm {
        guard let kdf = EVP_KDF_fetch(nil, name, nil) else {
            fatalError("OpenSSL's default provider has no \(name): \(OpenSSLError.drainQueue())")
        }
        return FetchedAlgorithm(kdf)
    }

    // Never freed: these live for the whole process.
}

enum OpenSSLAlgorithms {
    static let sha256 = FetchedAlgorithm.digest("SHA256")
    static let sha384 = FetchedAlgorithm.digest("SHA384")
    static let sha512 = FetchedAlgorithm.digest("SHA512")
    static let sha1 = FetchedAlgorithm.digest("SHA1")
    static let sha3_256 = FetchedAlgorithm.digest("SHA3-256")
    static let sha3_512 = FetchedAlgorithm.digest("SHA3-512")
    static let shake128 = FetchedAlgorithm.digest("SHAKE128")
    static let shake256 = FetchedAlgorithm.digest("SHAKE256")
    static let aes256GCM = FetchedAlgorithm.cipher("AES-256-GCM")
    static let chaCha20Poly1305 = FetchedAlgorithm.cipher("ChaCha20-Poly1305")
    static let hmac = FetchedAlgorithm.mac("HMAC")
    static let hkdf = FetchedAlgorithm.kdf("HKDF")
    static let scrypt = FetchedAlgorithm.kdf("SCRYPT")

    static func digest(_ algorithm: HashAlgorithm) -> FetchedAlgorithm {
        switch algorithm.backing {
        case .sha256: return sha256
        case .sha384: return sha384
        case .sha512: return sha512
        case .sha1: return sha1
        case .sha3_256: return sha3_256
        case .sha3_512: return sha3_512
        }
    }
}

/// OpenSSL's name for a hash, as `OSSL_PARAM` "digest" values want it.
extension HashAlgorithm {
    var openSSLName: String {
        switch backing {
        case .sha256: return "SHA256"
        case .sha384: return "SHA384"
        case .sha512: return "SHA512"
        case .sha1: return "SHA1"
        case .sha3_256: return "SHA3-256"
        case .sha3_512: return "SHA3-512"
        }
    }
}
