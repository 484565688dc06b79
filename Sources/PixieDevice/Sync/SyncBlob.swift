import Foundation
import PixieWire
import SiblingsCrypto

/// Rows too large for a frame, carried by blob-svc (docs/pixie-sync.md, "A row too large for a frame"): the sender
/// seals them, as a snapshot of just those rows, with BlobCrypto v1 under a fresh key, uploads the ciphertext, and
/// sends a **blob record** in a `sync_rows` batch in their place:
///
///     code 9 ‖ u32 length (101) ‖ blob_id (16) ‖ blob_format (1) = 1 ‖ key (32) ‖ nonce (12) ‖ sha256 (32) ‖
///     size_bytes (8)
///
/// the SyncOffer's fields, so that the hash travels inside the sealed message and only the ciphertext through
/// blob-svc. The receiver checks the ciphertext's SHA-256 and size before it opens anything, then deletes the blob.
package struct SyncBlobRecord: Sendable, Equatable {
    package static let code: UInt8 = 9
    static let bodyByteCount = 16 + 1 + 32 + 12 + 32 + 8

    package let blobID: Data
    package let key: Data
    package let nonce: Data
    package let sha256: Data
    package let sizeBytes: UInt64

    package var blobName: String { blobID.base64URLEncodedString() }

    package init(blobID: Data, key: Data, nonce: Data, sha256: Data, sizeBytes: UInt64) {
        self.blobID = blobID
        self.key = key
        self.nonce = nonce
        self.sha256 = sha256
        self.sizeBytes = sizeBytes
    }

    /// Reads a record's body; throws for one that is not 101 bytes or names a format this version does not know.
    package init(body: some DataProtocol) throws {
        let body = Data(body)
        guard body.count == Self.bodyByteCount else {
            throw SyncBlobError.malformed("a blob record is \(body.count) bytes, not \(Self.bodyByteCount)")
        }
        guard body[body.startIndex + 16] == SyncOffer.blobCryptoV1 else {
            throw SyncBlobError.malformed("a blob record names blob format \(body[body.startIndex + 16]), not 1")
        }
        let start = body.startIndex
        blobID = Data(body[start..<(start + 16)])
        key = Data(body[(start + 17)..<(start + 49)])
        nonce = Data(body[(start + 49)..<(start + 61)])
        sha256 = Data(body[(start + 61)..<(start + 93)])
        sizeBytes = body[(start + 93)..<(start + 101)].reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The whole record: code, length and body.
    package var encoded: Data {
        var out = Data([Self.code])
        StoreSnapshot.appendUInt32(UInt32(Self.bodyByteCount), to: &out)
        out += blobID
        out.append(SyncOffer.blobCryptoV1)
        out += key + nonce + sha256
        StoreSnapshot.appendUInt64(sizeBytes, to: &out)
        return out
    }

    /// Seals `rows` for blob-svc: a snapshot of them (secrets allowed, as on every sync path) under BlobCrypto v1
    /// with `key` and `nonce`. Returns the ciphertext; the record that names it is made once blob-svc stored it.
    package static func seal(_ rows: [StoreRow], key: SymmetricKey, nonce: Data) throws -> Data {
        var plaintext = StoreSnapshot.header(includeSecrets: true)
        for row in rows { StoreSnapshot.append(row, to: &plaintext) }
        plaintext.append(0)
        StoreSnapshot.appendUInt32(8, to: &plaintext)
        StoreSnapshot.appendUInt64(UInt64(rows.count), to: &plaintext)
        var sealer = try BlobCrypto.Sealer(key: key, nonce: nonce)
        var sealed = try sealer.update(plaintext)
        sealed += try sealer.finalize()
        plaintext.cleanse()
        return sealed
    }

    /// Opens the ciphertext this record names: its size and SHA-256 are checked first, then it is opened and read as
    /// a snapshot. Throws, and nothing is applied, if anything differs.
    package func open(_ sealed: Data) throws -> [StoreRow] {
        guard UInt64(sealed.count) == sizeBytes, safeCompare(Data(SHA256.hash(data: sealed)), sha256) else {
            throw SyncBlobError.tampered(
                "the blob of rows too large for a frame is not the one the sibling sealed (its size or SHA-256 differs)"
            )
        }
        var opener = try BlobCrypto.Opener(key: SymmetricKey(data: key), nonce: nonce)
        var plaintext = try opener.update(sealed)
        plaintext += try opener.finalize()
        defer { plaintext.cleanse() }
        var reader = StoreSnapshot.Reader()
        var rows: [StoreRow] = []
        try reader.feed(plaintext) { rows.append($0) }
        try reader.finish()
        return rows
    }
}

/// Why a blob of large rows was not applied.
package enum SyncBlobError: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    case tampered(String)

    package var description: String {
        switch self {
        case .malformed(let why), .tampered(let why): why
        }
    }
}
