import Foundation

/// The JSON bodies of blob-svc (docs/pixie-protocol.md, "blob-svc"). Uploads and downloads themselves are
/// raw `application/octet-stream` bodies.
public enum BlobAPI {
    /// What one upload-class token buys (`CredentialAPI.TokenClass.upload`), 64 MiB: one upload carries at
    /// most 64 tokens, so up to the 4 GiB sync cap. pixie-server's `BlobService.Configuration.bytesPerUploadToken`
    /// defaults to it.
    public static let bytesPerUploadToken: Int64 = 64 << 20
}

extension BlobAPI {
    /// 201 to POST /v1/blobs: where the sibling finds the blob, and the digest it must check.
    public struct UploadResponse: Codable, Sendable, Equatable {
        public var blobID: String
        public var sizeBytes: Int64
        /// SHA-256 of the stored bytes, base64url (43 characters).
        public var sha256: String
        /// Unix seconds; the blob is swept after.
        public var expiresAt: Int64

        public init(blobID: String, sizeBytes: Int64, sha256: String, expiresAt: Int64) {
            self.blobID = blobID
            self.sizeBytes = sizeBytes
            self.sha256 = sha256
            self.expiresAt = expiresAt
        }

        enum CodingKeys: String, CodingKey {
            case blobID = "blob_id"
            case sizeBytes = "size_bytes"
            case sha256
            case expiresAt = "expires_at"
        }
    }
}
