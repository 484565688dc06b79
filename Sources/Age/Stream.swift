import Dispatch
import Foundation
import SiblingsCrypto

/// The age payload (age spec, "Payload"): a 16-byte nonce, then STREAM over ChaCha20-Poly1305 in
/// 64 KiB chunks, each with the nonce `counter (11 bytes, big endian) ‖ last flag`.
///
/// Both directions run one batch pipeline (``Pipeline``): read a batch of chunks, seal or open them on
/// every core while the next batch is read, then write or release them in order. Batches start at one
/// chunk and double up to ``maxBatchChunks``, so a small file is one chunk on the calling thread and a
/// large one runs on every core in constant memory.
enum AgeStream {
    static let chunkSize = 64 * 1024
    static let tagSize = 16
    static let nonceSize = 16
    static let sealedChunkSize = chunkSize + tagSize
    /// The most chunks in one batch: 16 × 64 KiB = 1 MiB in, about as much out, twice (the batch being
    /// processed and the one being read).
    static let maxBatchChunks = 16

    /// Where bytes go: the caller's writer or release closure. Called on the calling thread, in order.
    typealias Sink = (UnsafeRawBufferPointer) throws -> Void

    static func payloadKey(fileKey: SymmetricKey, nonce: Data) throws -> SymmetricKey {
        try HKDF<SHA256>.deriveKey(
            inputKeyMaterial: fileKey, salt: nonce, info: Data("payload".utf8), outputByteCount: 32)
    }

    /// Runs `body` with the 12-byte chunk nonce, built on the stack.
    static func withChunkNonce<R>(
        _ counter: UInt64, last: Bool, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        try withUnsafeTemporaryAllocation(byteCount: 12, alignment: 1) { bytes in
            bytes.initializeMemory(as: UInt8.self, repeating: 0)
            for index in 0..<8 { bytes[10 - index] = UInt8(truncatingIfNeeded: counter >> (8 * UInt64(index))) }
            bytes[11] = last ? 1 : 0
            return try body(UnsafeRawBufferPointer(bytes))
        }
    }

    static func failure(_ reason: String) -> AgeError {
        AgeError(.payloadFailure, "the encrypted payload is \(reason); the file was altered or truncated")
    }

    /// Seals `input` chunk by chunk to `write`.
    static func seal(from input: ByteInput, key: SymmetricKey, write: Sink) throws {
        let pipeline = Pipeline(input: input, inputUnit: chunkSize, outputUnit: sealedChunkSize)
        try pipeline.run(
            process: { batch, index in
                let plaintext = batch.inputChunk(index)
                try withChunkNonce(batch.firstCounter &+ UInt64(index), last: batch.isLastChunk(index)) { nonce in
                    try ChaChaPoly.seal(
                        plaintext, into: batch.outputChunk(index, count: plaintext.count + tagSize), using: key,
                        nonce: nonce)
                }
                return true
            },
            finish: { batch, _ in
                let count = batch.inputCount + batch.chunkCount * tagSize
                try write(UnsafeRawBufferPointer(rebasing: batch.output[..<count]))
                return !batch.isFinal
            })
    }

    private static func open(
        _ batch: Pipeline.Batch, _ index: Int, key: SymmetricKey, last: Bool
    ) throws -> UnsafeRawBufferPointer? {
        let sealed = batch.inputChunk(index)
        guard sealed.count >= tagSize else { return nil }
        let plaintext = batch.outputChunk(index, count: sealed.count - tagSize)
        let verified = try withChunkNonce(batch.firstCounter &+ UInt64(index), last: last) { nonce in
            try ChaChaPoly.open(sealed, into: plaintext, using: key, nonce: nonce)
        }
        return verified ? UnsafeRawBufferPointer(plaintext) : nil
    }

    /// Opens the chunks from `input`, releasing each chunk's plaintext to `release` only after its tag
    /// verifies; throws `.payloadFailure` at the first chunk that does not, after releasing those before it.
    ///
    /// The chunks of a batch are opened in parallel, each with the last flag its position says; the
    /// release step then walks them in order and stops at the first that did not verify, so nothing after
    /// it is released. The rare cases (a chunk that verifies only with the other flag) are settled there,
    /// on the calling thread, exactly as a chunk-by-chunk reader would.
    static func open(from input: ByteInput, key: SymmetricKey, release: Sink) throws {
        let pipeline = Pipeline(input: input, inputUnit: sealedChunkSize, outputUnit: chunkSize)
        try pipeline.run(
            process: { batch, index in
                try open(batch, index, key: key, last: batch.isLastChunk(index)) != nil
            },
            finish: { batch, verified in
                for index in 0..<batch.chunkCount {
                    let counter = batch.firstCounter &+ UInt64(index)
                    let sealed = batch.inputChunk(index)
                    if !batch.isLastChunk(index) {
                        // A full chunk with more data after it.
                        if verified[index] {
                            try release(verifiedPlaintext(batch, index))
                        } else if let plaintext = try open(batch, index, key: key, last: true) {
                            // Authentic as the last chunk (age and rage release it too); what follows is not.
                            try release(plaintext)
                            throw failure("followed by data after its last chunk")
                        } else {
                            throw failure("altered: chunk \(counter) does not authenticate")
                        }
                        guard counter < UInt64.max else { throw failure("longer than STREAM allows") }
                        continue
                    }
                    guard sealed.count >= tagSize else {
                        throw failure(
                            counter == 0 ? "missing (no chunk after the nonce)" : "truncated (a chunk is cut short)")
                    }
                    guard verified[index] else {
                        if sealed.count == sealedChunkSize,
                            let plaintext = try open(batch, index, key: key, last: false)
                        {
                            // An authentic full chunk; the file ends where more must follow (age and rage
                            // release it too).
                            try release(plaintext)
                            throw failure("truncated: it ends after a chunk that is not marked as the last")
                        }
                        throw failure("altered or truncated: chunk \(counter) does not authenticate")
                    }
                    guard sealed.count > tagSize || counter == 0 else {
                        throw failure("malformed: its last chunk is empty though the payload is not")
                    }
                    try release(verifiedPlaintext(batch, index))
                }
                return !batch.isFinal
            })
    }

    /// The plaintext of a chunk that the parallel step opened and verified.
    private static func verifiedPlaintext(_ batch: Pipeline.Batch, _ index: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(batch.outputChunk(index, count: batch.inputChunk(index).count - tagSize))
    }
}
