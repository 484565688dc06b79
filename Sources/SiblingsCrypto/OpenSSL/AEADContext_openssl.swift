internal import COpenSSL
import Foundation

/// Owns one `EVP_CIPHER_CTX` running an AEAD (AES-256-GCM or ChaCha20-Poly1305) in one direction.
final class AEADContext {
    static let tagByteCount = 16

    private let context: OpaquePointer
    private let name: String
    private let sealing: Bool

    init(
        _ cipher: FetchedAlgorithm, name: String, key: SymmetricKey, nonce: UnsafeRawBufferPointer, sealing: Bool
    ) throws {
        self.name = name
        self.sealing = sealing
        context = try OpenSSLError.check(EVP_CIPHER_CTX_new(), "EVP_CIPHER_CTX_new")
        let direction: Int32 = sealing ? 1 : 0
        do {
            // Both ciphers default to a 12-byte IV; only another length needs a separate first step.
            let defaultLength = nonce.count == 12
            if !defaultLength {
                try OpenSSLError.check(
                    EVP_CipherInit_ex2(context, cipher.pointer, nil, nil, direction, nil), "\(name) init")
                try OpenSSLError.check(
                    EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_IVLEN, Int32(nonce.count), nil),
                    "\(name) set IV length")
            }
            try key.withUnsafeBytes { keyBytes in
                try OpenSSLError.check(
                    EVP_CipherInit_ex2(
                        context, defaultLength ? cipher.pointer : nil,
                        keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        nonce.baseAddress!.assumingMemoryBound(to: UInt8.self), direction, nil),
                    "\(name) key and nonce")
            }
        } catch {
            EVP_CIPHER_CTX_free(context)
            throw error
        }
    }

    /// Starts a new message under the same key with a new nonce of the length the context was made
    /// with (12 bytes): the key schedule is kept.
    func restart(nonce: UnsafeRawBufferPointer) throws {
        precondition(nonce.count == 12)
        try OpenSSLError.check(
            EVP_CipherInit_ex2(
                context, nil, nil, nonce.baseAddress!.assumingMemoryBound(to: UInt8.self), sealing ? 1 : 0, nil),
            "\(name) nonce")
    }

    /// Adds associated data; must come before any `update`.
    func authenticate(_ aad: UnsafeRawBufferPointer) throws {
        guard let base = aad.baseAddress, aad.count > 0 else { return }
        var offset = 0
        while offset < aad.count {
            let chunk = min(aad.count - offset, 1 << 30)
            var written: Int32 = 0
            try OpenSSLError.check(
                EVP_CipherUpdate(
                    context, nil, &written, (base + offset).assumingMemoryBound(to: UInt8.self), Int32(chunk)),
                "\(name) associated data")
            offset += chunk
        }
    }

    /// Encrypts or decrypts `input` into `output`, which must be at least as long (stream ciphers and
    /// GCM write exactly as many bytes as they read).
    func update(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws {
        guard let base = input.baseAddress, input.count > 0 else { return }
        precondition(output.count >= input.count)
        var offset = 0
        while offset < input.count {
            let chunk = min(input.count - offset, 1 << 30)
            var written: Int32 = 0
            try OpenSSLError.check(
                EVP_CipherUpdate(
                    context, (output.baseAddress! + offset).assumingMemoryBound(to: UInt8.self), &written,
                    (base + offset).assumingMemoryBound(to: UInt8.self), Int32(chunk)),
                "\(name) update")
            precondition(Int(written) == chunk, "\(name) wrote \(written) of \(chunk) bytes")
            offset += chunk
        }
    }

    /// Finishes sealing and returns the 16-byte tag.
    func finishSealing() throws -> Data {
        var tag = Data(count: Self.tagByteCount)
        try tag.withUnsafeMutableBytes { try finishSealing(tagInto: $0) }
        return tag
    }

    /// Finishes sealing and writes the 16-byte tag to the start of `tag`.
    func finishSealing(tagInto tag: UnsafeMutableRawBufferPointer) throws {
        precondition(sealing && tag.count >= Self.tagByteCount)
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { scratch in
            var written: Int32 = 0
            try OpenSSLError.check(EVP_CipherFinal_ex(context, scratch.baseAddress, &written), "\(name) final")
        }
        try OpenSSLError.check(
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(Self.tagByteCount), tag.baseAddress),
            "\(name) get tag")
    }

    /// Finishes opening: throws ``CryptoError/Code/authenticationFailure`` unless `tag` verifies.
    func finishOpening(tag: UnsafeRawBufferPointer) throws {
        precondition(!sealing && tag.count == Self.tagByteCount)
        try OpenSSLError.check(
            EVP_CIPHER_CTX_ctrl(
                context, EVP_CTRL_AEAD_SET_TAG, Int32(tag.count), UnsafeMutableRawPointer(mutating: tag.baseAddress)),
            "\(name) set tag")
        let verified = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { scratch in
            var written: Int32 = 0
            return EVP_CipherFinal_ex(context, scratch.baseAddress, &written) == 1
        }
        guard verified else {
            OpenSSLError.clearQueue()
            throw CryptoError(
                .authenticationFailure,
                "\(name): the tag does not match; the ciphertext, nonce or associated data was altered, or the key is wrong"
            )
        }
    }

    deinit { EVP_CIPHER_CTX_free(context) }
}
