import Foundation
import SiblingsCrypto

/// BlobCrypto v1 (docs/pixie-protocol.md, "BlobCrypto"): how a sibling seals its snapshot for blob-svc, in pieces,
/// so that a store of gigabytes is never whole in memory on either side.
///
/// The seed's BlobCrypto.seal is "a fresh random AES-256-GCM key and a 12-byte nonce". One GCM message over the
/// whole snapshot could be sealed in pieces, but not opened in pieces without handing out plaintext before its tag
/// is checked, so v1 is the STREAM construction (Hoang, Reyhanitabar, Rogaway and Vizár, "Online
/// Authenticated-Encryption and its Nonce-Reuse Misuse-Resistance", 2015; the shape age's payload uses) over
/// AES-256-GCM (NIST SP 800-38D):
///
/// - the plaintext is cut into chunks of ``chunkByteCount`` bytes; the last one holds the rest (1 to
///   ``chunkByteCount`` bytes, or 0 when the whole plaintext is empty, which is then one empty chunk);
/// - chunk *i* (from 0) is sealed under the blob's key with nonce `N ⊕ (uint88_be(i) ‖ last)`, where `N` is the
///   offer's 12-byte nonce and `last` is 1 for the last chunk and 0 otherwise, and no additional data;
/// - the blob is the chunks' `ciphertext ‖ tag (16)`, one after another.
///
/// A chunk moved, dropped or repeated opens under no nonce but its own position; a blob cut after a chunk boundary
/// ends in a chunk sealed as not last; a blob extended past the last chunk has bytes after it. Each is refused.
/// The key is fresh for every blob and never reused, so two blobs never share a (key, nonce) pair even though
/// every blob's chunk nonces follow the same pattern: GCM under one key and a repeated nonce leaks the XOR of
/// two plaintexts and lets anyone forge tags (SP 800-38D, Appendix A).
public enum BlobCrypto {
    /// The plaintext in each chunk but the last: 1 MiB.
    public static let chunkByteCount = 1 << 20
    /// The GCM tag after each chunk's ciphertext.
    public static let tagByteCount = 16
    /// A whole chunk as it is stored: its ciphertext and tag.
    public static let sealedChunkByteCount = chunkByteCount + tagByteCount

    /// The blob's length for a plaintext of `plaintextByteCount` bytes.
    public static func sealedByteCount(plaintextByteCount: UInt64) -> UInt64 {
        let chunks = max(1, (plaintextByteCount + UInt64(chunkByteCount) - 1) / UInt64(chunkByteCount))
        return plaintextByteCount + chunks * UInt64(tagByteCount)
    }

    /// The nonce of chunk `index`: the offer's nonce XOR the chunk's counter and last flag.
    static func chunkNonce(_ nonce: Data, index: UInt64, last: Bool) throws -> AES.GCM.Nonce {
        var bytes = [UInt8](nonce)
        for shift in 0..<8 { bytes[10 - shift] ^= UInt8(truncatingIfNeeded: index >> (8 * UInt64(shift))) }
        if last { bytes[11] ^= 1 }
        return try AES.GCM.Nonce(data: bytes)
    }

    static func checkKey(_ key: SymmetricKey, nonce: Data) throws {
        guard key.bitCount == 256, nonce.count == 12 else {
            throw BackupServiceError.invalid("BlobCrypto takes a 256-bit key and a 12-byte nonce")
        }
    }

    /// Seals a snapshot that arrives in pieces. It holds at most one chunk; the bytes it returns are the blob's,
    /// in order. Not copyable: two copies would seal two texts under the same nonces.
    public struct Sealer: ~Copyable {
        /// The blob's key: fresh and random, for this blob only. It goes to the new device in the sealed offer.
        public let key: SymmetricKey
        /// The blob's 12-byte nonce, fresh and random; it goes in the offer too.
        public let nonce: Data
        private var pending = Data()
        private var index: UInt64 = 0
        /// How many bytes of blob this sealer has returned.
        public private(set) var sealedByteCount: UInt64 = 0

        /// A sealer with a fresh random key and nonce (the seed: "a fresh random AES-256-GCM key and a 12-byte
        /// nonce").
        public init() {
            self.key = SymmetricKey(size: .bits256)
            self.nonce = SecureRandom.bytes(count: 12)
        }

        /// A sealer with a given key and nonce: drawn from a device's injectable randomness (``SyncBlobRecord``), or
        /// a test's that checks the bytes against another implementation.
        @_spi(Testing) public init(key: SymmetricKey, nonce: Data) throws {
            try BlobCrypto.checkKey(key, nonce: nonce)
            self.key = key
            self.nonce = nonce
        }

        /// Takes the next piece of plaintext and returns the blob bytes of every chunk it completed. A chunk is
        /// sealed only once a byte after it has arrived, since until then it might be the last.
        public mutating func update(_ piece: some DataProtocol) throws -> Data {
            pending.append(contentsOf: piece)
            guard pending.count > chunkByteCount else { return Data() }
            var out = Data()
            out.reserveCapacity((pending.count / chunkByteCount) * sealedChunkByteCount)
            var start = pending.startIndex
            while pending.endIndex - start > chunkByteCount {
                out += try seal(pending[start..<(start + chunkByteCount)], last: false)
                start += chunkByteCount
            }
            pending = Data(pending[start...])
            return out
        }

        /// Seals what is left as the last chunk and returns it.
        public consuming func finalize() throws -> Data {
            let out = try seal(pending, last: true)
            pending.cleanse()
            return out
        }

        private mutating func seal(_ chunk: Data, last: Bool) throws -> Data {
            let box = try AES.GCM.seal(
                chunk, using: key, nonce: try BlobCrypto.chunkNonce(nonce, index: index, last: last))
            index += 1
            sealedByteCount += UInt64(chunk.count + tagByteCount)
            return box.ciphertext + box.tag
        }
    }

    /// Opens a blob that arrives in pieces, returning each chunk's plaintext only after its tag verifies. It
    /// holds at most one sealed chunk and returns nothing of the last one until ``finalize()``, which is the
    /// only point at which a cut blob can be told from a whole one: plaintext from ``update(_:)`` is authentic
    /// but may be followed by a failure, so whatever consumes it must be undone unless ``finalize()`` succeeds
    /// (the device imports in one transaction, committed only then).
    public struct Opener: ~Copyable {
        private let key: SymmetricKey
        private let nonce: Data
        private var pending = Data()
        private var index: UInt64 = 0

        /// An opener for the blob of an offer: its key and nonce.
        public init(key: SymmetricKey, nonce: Data) throws {
            try BlobCrypto.checkKey(key, nonce: nonce)
            self.key = key
            self.nonce = nonce
        }

        /// Takes the next piece of the blob and returns the plaintext of every chunk it completed that is not
        /// the last.
        public mutating func update(_ piece: some DataProtocol) throws -> Data {
            pending.append(contentsOf: piece)
            guard pending.count > sealedChunkByteCount else { return Data() }
            var out = Data()
            var start = pending.startIndex
            while pending.endIndex - start > sealedChunkByteCount {
                out += try open(pending[start..<(start + sealedChunkByteCount)], last: false)
                start += sealedChunkByteCount
            }
            pending = Data(pending[start...])
            return out
        }

        /// Opens what is left as the last chunk and returns its plaintext; throws if the blob was cut or
        /// extended, or the last chunk was altered.
        public consuming func finalize() throws -> Data {
            guard pending.count >= tagByteCount else {
                throw BackupServiceError.tampered(
                    "the snapshot ends inside chunk \(index + 1): it was cut short on its way from the sibling")
            }
            guard pending.count > tagByteCount || index == 0 else {
                throw BackupServiceError.tampered(
                    "the snapshot ends in an empty chunk after a full one, which BlobCrypto never writes")
            }
            return try open(pending, last: true)
        }

        private mutating func open(_ sealed: Data, last: Bool) throws -> Data {
            let box = try AES.GCM.SealedBox(
                nonce: try BlobCrypto.chunkNonce(nonce, index: index, last: last),
                ciphertext: sealed.dropLast(tagByteCount),
                tag: sealed.suffix(tagByteCount))
            do {
                let plaintext = try AES.GCM.open(box, using: key)
                index += 1
                return plaintext
            } catch let error as CryptoError where error.code == .authenticationFailure {
                throw BackupServiceError.tampered(
                    last
                        ? "the snapshot's last chunk (\(index + 1)) does not authenticate: it was altered, or the "
                            + "snapshot was cut short or extended"
                        : "chunk \(index + 1) of the snapshot does not authenticate: it was altered, moved or cut")
            }
        }
    }
}
