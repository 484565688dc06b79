import Foundation

extension AES.GCM {
    /// The longest message one key and nonce may seal: 2^39 − 256 bits (NIST SP 800-38D, section 5.2.1.1).
    public static let maximumMessageByteCount: UInt64 = (1 << 36) - 32

    /// Seals a message that arrives in pieces, in constant memory. The output is the same as
    /// ``AES/GCM/seal(_:using:nonce:authenticating:)`` on the whole message: the concatenated ciphertext
    /// pieces, then ``finalize()``'s tag.
    ///
    /// There is deliberately no public streaming *opener*: plaintext of a GCM message is only
    /// authentic once the tag at the end verifies, so handing out pieces before then would hand out
    /// unauthenticated plaintext. Use ``AES/GCM/open(fileAt:to:using:nonce:authenticating:)``, which
    /// releases the plaintext file only after the tag verifies.
    public struct StreamingSealer: ~Copyable {
        private let context: AEADContext
        private var sealedByteCount: UInt64 = 0

        public init(using key: SymmetricKey, nonce: Nonce, authenticating authenticatedData: Data = Data()) throws {
            let context = try AEADEngine.context(AEADEngine.aes256GCM, key: key, nonce: nonce.bytes, sealing: true)
            try authenticatedData.withUnsafeBytes { try context.authenticate($0) }
            self.context = context
        }

        /// Seals the next piece and returns its ciphertext (the same length).
        public mutating func update(_ piece: some DataProtocol) throws -> Data {
            var output = Data(count: piece.count)
            try update(piece, into: &output)
            return output
        }

        /// Seals the next piece into `output`, which is resized to the piece's length.
        public mutating func update(_ piece: some DataProtocol, into output: inout Data) throws {
            sealedByteCount += UInt64(piece.count)
            guard sealedByteCount <= AES.GCM.maximumMessageByteCount else {
                throw CryptoError(
                    .invalidParameter,
                    "AES-GCM can seal at most \(AES.GCM.maximumMessageByteCount) bytes under one nonce (SP 800-38D)")
            }
            if output.count != piece.count { output.count = piece.count }
            try withContiguousBytes(piece) { base, count in
                try output.withUnsafeMutableBytes { buffer in
                    try context.update(UnsafeRawBufferPointer(start: base, count: count), into: buffer)
                }
            }
        }

        /// Ends the message and returns the 16-byte tag.
        public consuming func finalize() throws -> Data {
            try context.finishSealing()
        }
    }

    /// Seals the file at `source` into `destination` as `ciphertext ‖ tag`, reading and writing
    /// `chunkByteCount` bytes at a time. `destination` appears only complete (written to a temporary
    /// file beside it, synced, then renamed into place).
    public static func seal(
        fileAt source: URL, to destination: URL, using key: SymmetricKey, nonce: Nonce,
        authenticating authenticatedData: Data = Data(), chunkByteCount: Int = 1 << 20
    ) throws {
        let input = try FileIO.openForReading(source)
        defer { try? input.close() }
        let output = try AtomicFile(destination)
        do {
            var sealer = try StreamingSealer(using: key, nonce: nonce, authenticating: authenticatedData)
            var ciphertext = Data(count: chunkByteCount)
            while let piece = try FileIO.read(input, upTo: chunkByteCount, from: source) {
                try sealer.update(piece, into: &ciphertext)
                try output.write(ciphertext)
            }
            try output.write(try sealer.finalize())
            try output.commit()
        } catch {
            output.abort()
            throw error
        }
    }

    /// Opens a file written by ``seal(fileAt:to:using:nonce:authenticating:chunkByteCount:)`` (or any
    /// `ciphertext ‖ tag` file), in constant memory.
    ///
    /// The plaintext is written to a temporary file beside `destination` and renamed into place only
    /// after the tag verifies. If it does not, the temporary file is removed, nothing appears at
    /// `destination`, and ``CryptoError/Code/authenticationFailure`` is thrown.
    public static func open(
        fileAt source: URL, to destination: URL, using key: SymmetricKey, nonce: Nonce,
        authenticating authenticatedData: Data = Data(), chunkByteCount: Int = 1 << 20
    ) throws {
        let input = try FileIO.openForReading(source)
        defer { try? input.close() }
        let size = try FileIO.size(input, of: source)
        guard size >= UInt64(AEADContext.tagByteCount) else {
            throw CryptoError(
                .authenticationFailure, "\(source.path) is \(size) bytes, too short to hold an AES-GCM tag (16 bytes)")
        }
        let ciphertextByteCount = size - UInt64(AEADContext.tagByteCount)
        guard ciphertextByteCount <= maximumMessageByteCount else {
            throw CryptoError(.invalidParameter, "\(source.path) is longer than one AES-GCM message can be")
        }
        let output = try AtomicFile(destination)
        do {
            let context = try AEADEngine.context(AEADEngine.aes256GCM, key: key, nonce: nonce.bytes, sealing: false)
            try authenticatedData.withUnsafeBytes { try context.authenticate($0) }
            var remaining = ciphertextByteCount
            var plaintext = Data(count: chunkByteCount)
            while remaining > 0 {
                let want = Int(min(UInt64(chunkByteCount), remaining))
                guard let piece = try FileIO.read(input, upTo: want, from: source), piece.count == want else {
                    throw CryptoError(.io, "\(source.path) ended early: it changed while it was being read")
                }
                if plaintext.count != want { plaintext.count = want }
                try piece.withUnsafeBytes { inBytes in
                    try plaintext.withUnsafeMutableBytes { try context.update(inBytes, into: $0) }
                }
                try output.write(plaintext)
                remaining -= UInt64(want)
            }
            plaintext.withUnsafeMutableBytes { OpenSSLMemory.cleanse($0) }
            guard let tag = try FileIO.read(input, upTo: AEADContext.tagByteCount, from: source),
                tag.count == AEADContext.tagByteCount
            else {
                throw CryptoError(.io, "\(source.path) ended early: it changed while it was being read")
            }
            try tag.withUnsafeBytes { try context.finishOpening(tag: $0) }
            try output.commit()
        } catch {
            output.abort()
            throw error
        }
    }
}
