import Foundation

/// The JSON bodies of phone-verify-svc (docs/pixie-protocol.md, "phone-verify-svc"; docs/openapi.yaml).
public enum PhoneVerifyAPI {}

extension PhoneVerifyAPI {
    /// POST /v1/phone/verifications: send a code to a number.
    public struct StartRequest: Codable, Sendable, Equatable {
        /// E.164, `+` and 8 to 15 ASCII digits.
        public var phoneNumber: String

        public init(phoneNumber: String) { self.phoneNumber = phoneNumber }

        enum CodingKeys: String, CodingKey { case phoneNumber = "phone_number" }
    }

    /// 201 to ``StartRequest``.
    public struct StartResponse: Codable, Sendable, Equatable {
        public var verificationID: String
        /// Unix seconds.
        public var expiresAt: Int64
        public var codeLength: Int
        public var attemptsAllowed: Int

        public init(verificationID: String, expiresAt: Int64, codeLength: Int, attemptsAllowed: Int) {
            self.verificationID = verificationID
            self.expiresAt = expiresAt
            self.codeLength = codeLength
            self.attemptsAllowed = attemptsAllowed
        }

        enum CodingKeys: String, CodingKey {
            case verificationID = "verification_id"
            case expiresAt = "expires_at"
            case codeLength = "code_length"
            case attemptsAllowed = "attempts_allowed"
        }
    }

    /// POST /v1/phone/verifications/check: the code the person typed.
    public struct CheckRequest: Codable, Sendable, Equatable {
        public var verificationID: String
        public var code: String

        public init(verificationID: String, code: String) {
            self.verificationID = verificationID
            self.code = code
        }

        enum CodingKeys: String, CodingKey {
            case verificationID = "verification_id"
            case code
        }
    }

    /// 200 to ``CheckRequest``: the dual-signed ``PhoneOwnershipCert``.
    public struct CheckResponse: Codable, Sendable, Equatable {
        public var phoneCert: Base64URLBytes
        public var phoneID: Base64URLBytes
        /// Unix seconds; the cert's own expiry.
        public var expiresAt: Int64

        public init(phoneCert: Base64URLBytes, phoneID: Base64URLBytes, expiresAt: Int64) {
            self.phoneCert = phoneCert
            self.phoneID = phoneID
            self.expiresAt = expiresAt
        }

        enum CodingKeys: String, CodingKey {
            case phoneCert = "phone_cert"
            case phoneID = "phone_id"
            case expiresAt = "expires_at"
        }
    }
}
