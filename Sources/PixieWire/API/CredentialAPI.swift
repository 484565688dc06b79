import Foundation

/// The JSON bodies of credential-svc (docs/pixie-protocol.md, "credential-svc"; docs/privacy-pass.md).
public enum CredentialAPI {}

extension CredentialAPI {
    /// 200 to POST /v1/credentials/sender-cert (a session): a ``SenderCert`` for the session's device.
    public struct SenderCertResponse: Codable, Sendable, Equatable {
        public var senderCert: Base64URLBytes
        /// Unix seconds.
        public var expiresAt: Int64

        public init(senderCert: Base64URLBytes, expiresAt: Int64) {
            self.senderCert = senderCert
            self.expiresAt = expiresAt
        }

        enum CodingKeys: String, CodingKey {
            case senderCert = "sender_cert"
            case expiresAt = "expires_at"
        }
    }

    /// 200 to GET /v1/tokens/keys: the logged OPRF key list (label `oprf-keys`) and the current key's id.
    public struct KeysResponse: Codable, Sendable, Equatable {
        public var keyList: Base64URLBytes
        public var tokenKeyID: Base64URLBytes

        public init(keyList: Base64URLBytes, tokenKeyID: Base64URLBytes) {
            self.keyList = keyList
            self.tokenKeyID = tokenKeyID
        }

        enum CodingKeys: String, CodingKey {
            case keyList = "key_list"
            case tokenKeyID = "token_key_id"
        }
    }

    /// POST /v1/approval-tokens/challenge: a new device's pre-session batch, paid for by its phone cert.
    public struct ApprovalTokenRequest: Codable, Sendable, Equatable {
        public var phoneCert: Base64URLBytes
        /// A Privacy Pass issuance request (docs/privacy-pass.md).
        public var tokenRequest: Base64URLBytes

        public init(phoneCert: Base64URLBytes, tokenRequest: Base64URLBytes) {
            self.phoneCert = phoneCert
            self.tokenRequest = tokenRequest
        }

        enum CodingKeys: String, CodingKey {
            case phoneCert = "phone_cert"
            case tokenRequest = "token_request"
        }
    }

    /// POST /v1/tokens (a session): an enrolled device's refill.
    public struct SessionTokenRequest: Codable, Sendable, Equatable {
        public var tokenRequest: Base64URLBytes
        /// Which tokens: nil or `send` (the relay's and small uploads', 1 to 16), or `upload` (blob-svc uploads
        /// only, each buying far more bytes; 1 to 64, minted to sessions only).
        public var tokenClass: TokenClass?

        public init(tokenRequest: Base64URLBytes, tokenClass: TokenClass? = nil) {
            self.tokenRequest = tokenRequest
            self.tokenClass = tokenClass
        }

        enum CodingKeys: String, CodingKey {
            case tokenRequest = "token_request"
            case tokenClass = "class"
        }
    }

    /// The two kinds of rate-limit token, each under a key of its own whose key list the log holds (`oprf-keys`,
    /// `oprf-keys/upload`): tokens of one cannot pay for what the other does.
    public enum TokenClass: String, Codable, Sendable, CaseIterable {
        /// Relay SENDs and uploads of up to 64 MiB; minted to a number (pre-session) and to sessions.
        case send
        /// blob-svc uploads only (a whole-store snapshot); minted to sessions only.
        case upload
    }

    /// 200 to either token request: the issuer's evaluation, which the device finalizes into tokens.
    public struct TokenResponse: Codable, Sendable, Equatable {
        public var tokenResponse: Base64URLBytes

        public init(tokenResponse: Base64URLBytes) { self.tokenResponse = tokenResponse }

        enum CodingKeys: String, CodingKey { case tokenResponse = "token_response" }
    }
}
