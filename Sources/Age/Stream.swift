import Foundation
import SiblingsCrypto

/// The age payload (age spec, "Payload"): a 16-byte nonce, then STREAM over ChaCha20-Poly1305 in
/// 64 KiB chunks, each with the nonce `counter (11 bytes, big endian) ‖ last flag`.
enum AgeStream {
    static let chunkSize = 64 * 1024
    static let tagSize = 16
    static let nonceSize = 16

    static func payloadKey(fileKey: SymmetricKey, nonce: Data) throws -> SymmetricKey {
        try HKDF<SHA256>.deriveKey(
            inputKeyMaterial: fileKey, salt: nonce, info: Data("payload".utf8), outputByteCount: 32)
    }

    static func chunkNonce(_ counter: UInt64, last: Bool) throws -> ChaChaPoly.Nonce {
        var bytes = Data(repeating: 0, count: 12)
        for index in 0..<8 { bytes[10 - index] = UInt8(truncatingIfNeeded: counter >> (8 * UInt64(index))) }
        bytes[11] = last ? 1 : 0
        return try ChaChaPoly.Nonce(data: bytes)
    }

    static func failure(_ reason: String) -> AgeError {
        AgeError(.payloadFailure, "the encrypted payload is \(reason); the file was altered or truncated")
    }

    /// Seals `input` chunk by chunk to `write`.
    static func seal(from input: ByteInput, key: SymmetricKey, write: (Data) throws -> Void) throws {
        var counter: UInt64 = 0
        while true {
            try input.fill(chunkSize + 1)
            let last = input.available <= chunkSize
            let plaintext = try input.read(chunkSize)
            let box = try ChaChaPoly.seal(plaintext, using: key, nonce: try chunkNonce(counter, last: last))
            try write(box.ciphertext + box.tag)
            if last { return }
            counter += 1
        }
    }

    private static func open(_ chunk: Data, key: SymmetricKey, counter: UInt64, last: Bool) -> Data? {
        guard
            let box = try? ChaChaPoly.SealedBox(
                nonce: try chunkNonce(counter, last: last), ciphertext: chunk.dropLast(tagSize),
                tag: chunk.suffix(tagSize))
        else { return nil }
        return try? ChaChaPoly.open(box, using: key)
    }

    /// Opens the chunks from `input`, releasing each chunk's plaintext to `release` only after its tag
    /// verifies; throws `.payloadFailure` at the first chunk that does not, after releasing those before it.
    static func open(from input: ByteInput, key: SymmetricKey, release: (Data) throws -> Void) throws {
        let sealedChunk = chunkSize + tagSize
        var counter: UInt64 = 0
        while true {
            try input.fill(sealedChunk + 1)
            if input.available > sealedChunk {
                let chunk = try input.read(sealedChunk)
                if let plaintext = open(chunk, key: key, counter: counter, last: false) {
                    try release(plaintext)
                } else if let plaintext = open(chunk, key: key, counter: counter, last: true) {
                    // The chunk is authentic as the last one (age and rage release it too); what follows is not.
                    try release(plaintext)
                    throw failure("followed by data after its last chunk")
                } else {
                    throw failure("altered: chunk \(counter) does not authenticate")
                }
                guard counter < UInt64.max else { throw failure("longer than STREAM allows") }
                counter += 1
                continue
            }
            let chunk = try input.read(sealedChunk)
            guard chunk.count >= tagSize else {
                throw failure(counter == 0 ? "missing (no chunk after the nonce)" : "truncated (a chunk is cut short)")
            }
            guard let plaintext = open(chunk, key: key, counter: counter, last: true) else {
                if chunk.count == sealedChunk, let plaintext = open(chunk, key: key, counter: counter, last: false) {
                    // An authentic full chunk; the file ends where more must follow (age and rage release it too).
                    try release(plaintext)
                    throw failure("truncated: it ends after a chunk that is not marked as the last")
                }
                throw failure("altered or truncated: chunk \(counter) does not authenticate")
            }
            guard !plaintext.isEmpty || counter == 0 else {
                throw failure("malformed: its last chunk is empty though the payload is not")
            }
            try release(plaintext)
            return
        }
    }
}
